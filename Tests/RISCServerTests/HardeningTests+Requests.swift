import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import RISCClient
import RISCCore
import RISCSQLite
import RISCTestKit
import Testing

@testable import RISCServer

#if canImport(Glibc)
import Glibc
#endif

extension ServerHardeningTests {
    @Test("a valid SET followed by garbage: 202 for the SET (stored), then a JSON 400 for the garbage, logged and counted")
    func validThenGarbage() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let answer = try RawConnection.exchange(port: harness.publicPort, try harness.rawRequest("before-garbage") + Array("GARBAGE \u{1}\r\n\r\n".utf8))
        #expect(answer.hasPrefix("HTTP/1.1 202"), "\(answer)")
        let second = answer.range(of: "HTTP/1.1 400").map { String(answer[$0.lowerBound...]) } ?? ""
        #expect(second.contains("Content-Type: application/json"))
        #expect(second.contains(#""err":"invalid_request""#) && second.contains("malformed HTTP request"))
        #expect(second.contains("Connection: close"))
        try await Task.sleep(for: .milliseconds(100))
        let lines = harness.eventLogLines
        #expect(lines.contains { $0["jti"] == "before-garbage" && $0["outcome"] == "accepted" })
        #expect(lines.contains { $0["outcome"] == "rejected" && $0["description"]?.stringValue?.hasPrefix("malformed HTTP") == true })
        #expect(try await Self.metrics(harness).contains(#"risc_sets_total{outcome="malformed"} 1"#))
        // Garbage alone gets the same answer.
        let alone = try RawConnection.exchange(port: harness.publicPort, Array("\u{1B}[2J\r\n\r\n".utf8))
        #expect(alone.hasPrefix("HTTP/1.1 400") && alone.contains("malformed HTTP request"))
        #expect(!alone.contains("\u{1B}"))
        try await harness.stop()
    }

    @Test("RFC 9112 §3.2: no Host field in HTTP/1.1, two, or one that names no host: 400 invalid_request, nothing stored; HTTP/1.0 needs none; an absolute-form target is served at its path")
    func hostAndAbsoluteForm() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        func request(_ line: String, _ fields: String, jti: String) throws -> String {
            let token = try harness.token(jti: jti)
            return try RawConnection.exchange(
                port: harness.publicPort, Array("\(line)\r\n\(fields)Connection: close\r\nContent-Length: \(token.utf8.count)\r\n\r\n\(token)".utf8))
        }
        let refused = [
            ("no-host", "POST /events HTTP/1.1", "", "without a Host field"),
            ("two-hosts", "POST /events HTTP/1.1", "Host: a\r\nHost: b\r\n", "more than one Host field"),
            ("bad-host", "POST /events HTTP/1.1", "Host: a b/c\r\n", "Host field"),
        ]
        for (jti, line, fields, reason) in refused {
            let answer = try request(line, fields, jti: jti)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(jti): \(answer)")
            #expect(answer.contains(#""err":"invalid_request""#) && answer.contains(reason), "\(jti): \(answer)")
            #expect(answer.contains("Connection: close"), "\(jti): \(answer)")
        }
        // HTTP/1.0 has no Host requirement; an absolute-form target is its path, whatever the Host says.
        #expect(try request("POST /events HTTP/1.0", "", jti: "http10").hasPrefix("HTTP/1.0 202"))
        let absolute = try request("POST http://receiver.example/events HTTP/1.1", "Host: other\r\n", jti: "absolute-form")
        #expect(absolute.hasPrefix("HTTP/1.1 202"), "\(absolute)")
        #expect(try request("POST HTTPS://receiver.example:8443/events?via=proxy HTTP/1.1", "Host: x\r\n", jti: "absolute-query").hasPrefix("HTTP/1.1 202"))
        #expect(try request("POST http://receiver.example/nothing HTTP/1.1", "Host: x\r\n", jti: "absolute-404").hasPrefix("HTTP/1.1 404"))
        #expect(try request("POST http://receiver.example HTTP/1.1", "Host: x\r\n", jti: "absolute-root").hasPrefix("HTTP/1.1 404"))
        await harness.indexed()
        let accepted = Set(harness.eventLogLines.filter { $0["outcome"] == "accepted" }.compactMap { $0["jti"]?.stringValue })
        #expect(accepted == ["http10", "absolute-form", "absolute-query"])
        #expect(try await Self.metrics(harness).contains(#"risc_sets_total{outcome="malformed"} 3"#))
        try await harness.stop()
    }

    @Test("RFC 9112 §6.1: a body in a transfer coding risc does not decode is 501 naming it, not a 400 that loses the SET; Transfer-Encoding in HTTP/1.0 is faulty framing: 400")
    func transferCodings() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        func chunked(_ line: String, coding: String, body: [UInt8]) throws -> String {
            let head = "\(line)\r\nHost: x\r\nTransfer-Encoding: \(coding)\r\nConnection: close\r\n\r\n" + String(body.count, radix: 16) + "\r\n"
            return try RawConnection.exchange(port: harness.publicPort, Array(head.utf8) + body + Array("\r\n0\r\n\r\n".utf8))
        }
        let gzipped: [UInt8] = [0x1F, 0x8B, 0x08, 0x00] + Array(repeating: 0x7F, count: 40)  // gzip's magic, then bytes no token holds
        let gzip = try chunked("POST /events HTTP/1.1", coding: "gzip, chunked", body: gzipped)
        #expect(gzip.hasPrefix("HTTP/1.1 501"), "\(gzip)")
        #expect(gzip.contains("Transfer-Encoding gzip is not supported"), "\(gzip)")
        // A compact JWS under the label is read as it is, as with Content-Encoding.
        let labelled = try chunked("POST /events HTTP/1.1", coding: "gzip, chunked", body: Array(try harness.token(jti: "te-labelled").utf8))
        #expect(labelled.hasPrefix("HTTP/1.1 202"), "\(labelled)")
        let http10 = try chunked("POST /events HTTP/1.0", coding: "chunked", body: Array(try harness.token(jti: "te-http10").utf8))
        #expect(http10.hasPrefix("HTTP/1.0 400") && http10.contains("Transfer-Encoding in an HTTP/1.0 request"), "\(http10)")
        #expect(try chunked("POST /events HTTP/1.1", coding: "chunked", body: Array(try harness.token(jti: "te-plain").utf8)).hasPrefix("HTTP/1.1 202"))
        await harness.indexed()
        let accepted = Set(harness.eventLogLines.filter { $0["outcome"] == "accepted" }.compactMap { $0["jti"]?.stringValue })
        #expect(accepted == ["te-labelled", "te-plain"])
        #expect(harness.eventLogLines.contains { $0["http_status"] == 501 && $0["err"] == "invalid_request" })
        try await harness.stop()
    }

    /// Found: requests HTTP/1.1's parser refuses were answered with its own terse names, some of
    /// which said nothing of the fault: Content-Length beside `Transfer-Encoding: chunked` (the
    /// framing of request smuggling) was "unknown (http_parser error)", an HTTP/2 connection
    /// preface (a client that assumed h2 on a plain port) "paused (swift-http-parser error)".
    @Test("a request HTTP/1.1's parser refuses gets a 400 that says what is wrong with it, never the parser's internal names")
    func parserRefusalsSayWhy() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let token = try harness.token(jti: "framing")
        let length = "Content-Length: \(token.utf8.count)\r\n"
        let cases: [(name: String, request: String, says: [String])] = [
            ("CL and TE", "POST /events HTTP/1.1\r\nHost: x\r\n\(length)Transfer-Encoding: chunked\r\n\r\n\(token)", ["Content-Length", "Transfer-Encoding"]),
            ("two CLs", "POST /events HTTP/1.1\r\nHost: x\r\n\(length)Content-Length: 5\r\n\r\n\(token)", ["more than one Content-Length"]),
            ("CL not a number", "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: +12\r\n\r\n", ["Content-Length"]),
            ("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ["HTTP/2", "HTTP/1.1"]),
            ("space before colon", "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc", ["header field"]),
            ("bad chunk size", "POST /events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", ["chunk size"]),
        ]
        for (name, request, says) in cases {
            let answer = try RawConnection.exchange(port: harness.publicPort, Array(request.utf8))
            #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains(#""err":"invalid_request""#), "\(name): \(answer)")
            for words in says { #expect(answer.contains(words), "\(name): \(answer)") }
            for inner in ["http_parser", "swift-http-parser", "unknown", "paused"] { #expect(!answer.contains(inner), "\(name): \(answer)") }
        }
        await harness.indexed()
        #expect(!harness.eventLogLines.contains { $0["outcome"] == "accepted" })
        try await harness.stop()
    }

    /// Found: after a request that asks to upgrade (`Connection: Upgrade` with `Upgrade: h2c`, as
    /// `curl --http2` sends on http://) or a CONNECT, NIO's decoder reads nothing more on that
    /// connection, so a SET pipelined or sent next on it was never answered: the connection hung
    /// until the request timeout. risc does not upgrade: it answers, says `Connection: close`, and closes.
    @Test("a request asking to upgrade (or CONNECT) is answered with Connection: close, so nothing sent after it waits on a connection that reads no more")
    func upgradeClosesTheConnection() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let first = try harness.token(jti: "upgrade-first"), second = try harness.rawRequest("upgrade-second")
        let upgrade = "POST /events HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
        let answer = try RawConnection.exchange(port: harness.publicPort, Array("\(upgrade)Content-Length: \(first.utf8.count)\r\n\r\n\(first)".utf8) + second)
        #expect(answer.hasPrefix("HTTP/1.1 202") && answer.contains("Connection: close"), "\(answer)")
        let connect = try RawConnection.exchange(port: harness.publicPort, Array("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n".utf8) + second)
        #expect(connect.hasPrefix("HTTP/1.1 404") && connect.contains("Connection: close"), "\(connect)")
        // The SET after it was not read, so it was not acknowledged: the transmitter sends it again.
        #expect(try await harness.post(try harness.token(jti: "upgrade-second")).status == 202)
        try await harness.stop()
    }

    /// Found: the push endpoint's answers carried no `Date` field, which RFC 9110 §6.6.1 has an
    /// origin server with a clock send in every 2xx, 3xx and 4xx answer (Hummingbird's admin
    /// listener did). It comes from the receiver's clock, formatted as IMF-fixdate.
    @Test("every answer of the push endpoint carries Date (RFC 9110 §6.6.1) from the receiver's clock: 202, 400, 404, 405, 413")
    func dateField() async throws {
        let harness = try ServerHarness()
        let clock = TestClock(1_800_000_000.4)
        harness.clock = clock
        try await harness.start()
        let token = try harness.token(jti: "dated")
        for (request, status) in [
            ("POST /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(token.utf8.count)\r\n\r\n\(token)", "202"),
            ("POST /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\nx.y.z", "400"),
            ("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "404"), ("GET /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "405"),
            ("POST /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10000000\r\n\r\n", "413"),
        ] {
            let answer = try RawConnection.exchange(port: harness.publicPort, Array(request.utf8))
            #expect(answer.hasPrefix("HTTP/1.1 \(status)") && answer.contains("\r\nDate: Fri, 15 Jan 2027 08:00:00 GMT\r\n"), "\(answer)")
        }
        clock.advance(86_400 * 40 + 3_661)
        let later = try RawConnection.exchange(port: harness.publicPort, Array("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(later.contains("\r\nDate: Wed, 24 Feb 2027 09:01:01 GMT\r\n"), "\(later)")
        try await harness.stop()
    }

    @Test("a client that half-closes after its request still gets the answer")
    func halfClosed() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let fd = try RawConnection.connected(port: harness.publicPort)
        defer { close(fd) }
        // CI (a loaded machine, 2026-11-29) once read nothing within the connection's 5 s: wait
        // longer here, so that a slow answer passes and one that never comes says so.
        var patience = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size))
        let request = try harness.rawRequest("half-closed")
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))
        let started = Date()
        let answer = Self.readAll(fd)
        #expect(answer.hasPrefix("HTTP/1.1 202"), "after \(Date().timeIntervalSince(started)) s: \(answer)")
        await harness.indexed()
        #expect(harness.eventLogLines.contains { $0["jti"] == "half-closed" && $0["outcome"] == "accepted" })
        try await harness.stop()
    }

    @Test("refused requests are all counted, but their log lines are sampled per address and summed up")
    func sampledRejectionLog() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let fd = try RawConnection.connected(port: harness.publicPort)
        let junk = "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nx.y.z"
        let notFound = "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"
        let requests = Array((String(repeating: junk, count: 300) + String(repeating: notFound, count: 50) + "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").utf8)
        _ = requests.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let answers = Self.readAll(fd)
        close(fd)
        #expect(answers.components(separatedBy: "HTTP/1.1 400").count - 1 == 300)
        #expect(answers.components(separatedBy: "HTTP/1.1 404").count - 1 == 51)
        let metrics = try await Self.metrics(harness)
        #expect(metrics.contains(#"risc_sets_total{outcome="rejected",err="invalid_request"} 300"#))
        // Issue 26 §6: 404s are scanners' noise, not SET outcomes; both refusals' series from the start.
        #expect(metrics.contains(#"risc_push_requests_refused_total{reason="not_found"} 51"#), "\(metrics)")
        #expect(metrics.contains(#"risc_push_requests_refused_total{reason="method_not_allowed"} 0"#))
        #expect(!metrics.contains(#"risc_sets_total{outcome="not_found"}"#))
        try await harness.stop()
        let lines = harness.eventLogLines
        let logged = lines.filter { $0["outcome"] == "rejected" }.count
        #expect(logged <= 25, "\(logged) rejected lines for one address")
        let summary = lines.first { $0["outcome"] == "suppressed" }
        #expect(summary?["remote"] == "127.0.0.1")
        #expect(Int(summary?["count"]?.numberValue ?? 0) + logged == 351)
    }

    @Test("by default one address cannot take every public slot: the 33rd connection is refused, another address is served")
    func defaultPerAddressCap() async throws {
        #expect(ReceiverConfiguration().maxConnectionsPerAddress == 32)
        let harness = try ServerHarness()
        try await harness.start()
        var held: [RawConnection.Held] = []
        for index in 0..<32 {
            let connection = try RawConnection.Held(port: harness.publicPort)
            #expect(connection.exchange(try harness.rawRequest("slot-\(index)"))?.hasPrefix("HTTP/1.1 202") == true)
            held.append(connection)
        }
        let over = try RawConnection.Held(port: harness.publicPort)
        #expect(over.exchange(try harness.rawRequest("slot-33")) == nil, "a 33rd connection from one address was served")
        let other = try RawConnection.Held(port: harness.publicPort, source: "127.0.0.2")
        #expect(other.exchange(try harness.rawRequest("other-address"))?.hasPrefix("HTTP/1.1 202") == true)
        held.removeAll()
        try await harness.stop()
    }

    @Test("IPv6 peers are limited by their /64; IPv4-mapped addresses as IPv4")
    func addressGroups() throws {
        let a = try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 1)
        let b = try SocketAddress(ipAddress: "2001:db8:1:2:ffff::9", port: 2)
        let c = try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 3)
        #expect(AddressGroup.key(a) == AddressGroup.key(b))
        #expect(AddressGroup.key(a) == "2001:db8:1:2::/64")
        #expect(AddressGroup.key(a) != AddressGroup.key(c))
        #expect(AddressGroup.key(try SocketAddress(ipAddress: "::ffff:192.0.2.7", port: 1)) == "192.0.2.7")
        #expect(AddressGroup.key(try SocketAddress(ipAddress: "192.0.2.7", port: 1)) == "192.0.2.7")
    }

    @Test("issue 24 #12: the invalid-request limiter groups IPv6 clients by their /64 (and IPv4-mapped ones as IPv4), as the connection cap does")
    func limiterGroupsLikeTheCap() {
        let limiter = InvalidRequestLimiter(perMinute: 2)
        limiter.recordInvalid("[2001:db8:1:2::1]", now: 0)
        limiter.recordInvalid("[2001:db8:1:2::2]", now: 0)
        #expect(limiter.check("[2001:db8:1:2:ffff::9]", now: 0) != nil, "another address of the same /64 was not limited")
        #expect(limiter.check("[2001:db8:1:3::1]", now: 0) == nil)
        limiter.recordInvalid("192.0.2.7", now: 0)
        limiter.recordInvalid("192.0.2.7", now: 0)
        #expect(limiter.check("[::ffff:192.0.2.7]", now: 0) != nil)
        #expect(limiter.check("192.0.2.8", now: 0) == nil)
    }

    @Test("the wall clock stepping back an hour (NTP, a restored VM) does not limit an address that had sent a few invalid requests for that hour")
    func limiterAfterTheClockSteppedBack() {
        let limiter = InvalidRequestLimiter(perMinute: 60)
        limiter.recordInvalid("192.0.2.7", now: 10_000)
        limiter.recordInvalid("192.0.2.7", now: 10_000)
        #expect(limiter.check("192.0.2.7", now: 10_000) == nil, "58 of its 60 left")
        #expect(limiter.check("192.0.2.7", now: 6_400) == nil, "limited after the clock stepped back an hour")
        // From there it refills as before: its 60 take a minute to spend.
        for _ in 0..<60 { limiter.recordInvalid("192.0.2.7", now: 6_401) }
        #expect(limiter.check("192.0.2.7", now: 6_401)?.retryAfter == 1)
    }

    @Test("a correctly signed SET with iat 1e19 gets a 400, and the receiver keeps serving")
    func absurdIssuedAt() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let response = try await harness.post(try harness.token(jti: "absurd") { $0["iat"] = .number(1e19) })
        #expect(response.status == 400)
        #expect(String(decoding: response.body, as: UTF8.self).contains("'iat' is not a NumericDate"))
        #expect(try await harness.post(try harness.token(jti: "after-absurd")).status == 202)
        try await harness.stop()
    }

    @Test("data files are created 0600 and the data directory 0700, whatever the umask")
    func privateDataFiles() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        let harness = try ServerHarness()
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "modes")).status == 202)
        try await harness.stop()
        func mode(_ name: String) -> Int {
            let path = name.isEmpty ? harness.dataDirectory : harness.dataDirectory + "/" + name
            return ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
        }
        #expect(mode("") == 0o700)
        for file in ["risc.sqlite3", "risc.sqlite3-wal", "risc.sqlite3-shm", "events.log", "token-key", "jwks-cache.json"] {
            let found = mode(file)
            if found >= 0 { #expect(found == 0o600, "\(file) is \(String(found, radix: 8))") }
        }
        #expect(mode("risc.sqlite3") == 0o600 && mode("events.log") == 0o600 && mode("jwks-cache.json") == 0o600)
    }

    @Test("the embedded store's data directory is held by one receiver at a time; released on stop")
    func dataDirectoryLock() async throws {
        let first = try ServerHarness()
        try await first.start()
        let error = #expect(throws: StoreError.self) { _ = try ServerHarness(dataDirectory: first.dataDirectory).makeReceiver() }
        #expect(error?.code == .refused)
        #expect(error?.description.contains("pid \(getpid())") == true)
        try await first.stop()
        let second = try ServerHarness(dataDirectory: first.dataDirectory)
        try await second.start()
        #expect(try await second.post(try second.token(jti: "after-lock")).status == 202)
        try await second.stop()
    }
}
