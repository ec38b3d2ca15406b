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

/// What an attacker found over loopback (issue 13), each with the behaviour the fix gives.
@Suite("Hardening: hostile clients", .serialized)
struct ServerHardeningTests {
    /// Pipelines requests on one connection and never reads an answer, for at most `seconds`.
    /// Returns how it ended: the server closed the connection, or it stopped reading (a whole
    /// second in which nothing more could be sent), or neither (it kept reading: memory grows).
    static func floodWithoutReading(port: Int, request: String, seconds: Double) -> (ended: String, sentBytes: Int) {
        guard let fd = try? RawConnection.connected(port: port) else { return ("connect failed", 0) }
        defer { close(fd) }
        var small: Int32 = 4_096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let chunk = Array(String(repeating: request, count: 1_000).utf8)
        let start = Date()
        var sent = 0, sentAtWindow = 0, window = Date()
        while Date().timeIntervalSince(start) < seconds {
            // Where the stream is in the repeated chunk: a partial send continues where it stopped.
            let offset = sent % chunk.count
            let count = chunk[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno != EAGAIN && errno != EWOULDBLOCK { return ("closed", sent) }
            if count > 0 { sent += count }
            if Date().timeIntervalSince(window) >= 1 {
                if sent == sentAtWindow { return ("stopped reading", sent) }
                sentAtWindow = sent
                window = Date()
            }
        }
        return ("kept reading", sent)
    }

    static func metrics(_ harness: ServerHarness) async throws -> String {
        String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
    }

    @Test("a client that pipelines and never reads is stopped (backpressure, then closed past the bound); others are served")
    func pipelinedFlood() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        for request in ["GET /events HTTP/1.1\r\nHost: x\r\n\r\n", "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nx.y.z"] {
            let (ended, sent) = Self.floodWithoutReading(port: harness.publicPort, request: request, seconds: 20)
            #expect(ended != "kept reading", "the server read \(sent) bytes of unanswerable requests")
            #expect(sent < 64 << 20)
        }
        #expect(try await harness.post(try harness.token(jti: "after-flood")).status == 202)
        let metrics = try await Self.metrics(harness)
        #expect(metrics.contains("risc_push_connections_overflowed_total "))
        try await harness.stop()
    }

    @Test("the admin listener, too, stops reading from a client that does not read (Hummingbird's backpressure)")
    func adminPipelinedFlood() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let port = Int(harness.adminURL.split(separator: ":").last!)!
        let (ended, sent) = Self.floodWithoutReading(port: port, request: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", seconds: 20)
        #expect(ended != "kept reading", "the admin listener read \(sent) bytes")
        #expect(try await harness.get(harness.adminURL + "/healthz").status == 200)
        try await harness.stop()
    }

    /// Sends `bytes` on `connection` and returns the answer's status line, or nil when none
    /// arrives within `seconds`. The blocking wait runs on `BlockingPool`'s threads, never on the
    /// cooperative pool the server's handlers need (two tests blocking both of its threads at once
    /// starved the server in CI).
    static func statusLine(_ connection: RawConnection.Held, _ bytes: [UInt8], seconds: Int) async -> String? {
        let fd = connection.fd
        return await BlockingPool.shared.run {
            var wait = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            if !bytes.isEmpty { _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while !received.contains(0x0A) {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return nil }
                received += buffer[0..<count]
            }
            return String(decoding: received.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        }
    }

    /// Sends `bytes` and reads until the server closes the connection or `seconds` pass with nothing
    /// more: what arrived, and whether it was closed.
    static func answerThenClose(_ connection: RawConnection.Held, _ bytes: [UInt8], seconds: Int) async -> (text: String, closed: Bool) {
        let fd = connection.fd
        return await BlockingPool.shared.run {
            var wait = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return (String(decoding: received, as: UTF8.self), count == 0) }
                received += buffer[0..<count]
            }
        }
    }

    // Found: the admin listener kept an HTTP/1.0 connection open after its answer (RFC 9112
    // §9.3: without keep-alive it ends with the answer), so a health check that reads to the end,
    // as Nagios' and Icinga's check_http and keepalived's HTTP_GET do, waited out
    // admin.request_timeout (30 s) and reported the receiver down; and an HTTP/1.1 client's
    // `Connection: Close` (any capitalization but "close") was not honoured either.
    @Test("the admin listener ends a connection with its answer when the request asks it to: HTTP/1.0 without keep-alive, Connection: close in any case; others stay open")
    func adminConnectionClose() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let port = Int(harness.adminURL.split(separator: ":").last!)!
        for request in [
            "GET /readyz HTTP/1.0\r\n\r\n", "GET /no-such-page HTTP/1.0\r\n\r\n", "POST /healthz HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n", "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\nTE: trailers\r\n\r\n",
        ] {
            let answer = await Self.answerThenClose(try RawConnection.Held(port: port), Array(request.utf8), seconds: 10)
            #expect(answer.closed && answer.text.hasPrefix("HTTP/1.1 "), "\(request.prefix { $0 != "\r" }): \(answer.text.prefix(200))")
            if request.hasPrefix("GET /readyz") { #expect(answer.text.hasSuffix("}") && answer.text.contains(#""ready":true"#), "\(answer.text)") }
        }
        for request in ["GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let answer = await Self.answerThenClose(try RawConnection.Held(port: port), Array(request.utf8), seconds: 1)
            #expect(!answer.closed && answer.text.hasPrefix("HTTP/1.1 200"), "\(request.prefix { $0 != "\r" }): \(answer.text.prefix(200))")
        }
        try await harness.stop()
    }

    @Test("admin.max_connections: one more connection waits unserved until one closes")
    func adminConnectionCap() async throws {
        let harness = try ServerHarness { $0.adminMaxConnections = 2 }
        try await harness.start()
        let port = Int(harness.adminURL.split(separator: ":").last!)!
        let request = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        var first: RawConnection.Held? = try RawConnection.Held(port: port)
        let second = try RawConnection.Held(port: port)
        #expect(await Self.statusLine(first!, request, seconds: 10) == "HTTP/1.1 200 OK")
        #expect(await Self.statusLine(second, request, seconds: 10) == "HTTP/1.1 200 OK")
        let third = try RawConnection.Held(port: port)
        #expect(await Self.statusLine(third, request, seconds: 1) == nil, "a third admin connection was served")
        first = nil
        #expect(await Self.statusLine(third, [], seconds: 10) == "HTTP/1.1 200 OK", "the waiting connection was not served once a slot freed")
        try await harness.stop()
    }

    @Test("issue 24 #5: idle connections from one address cannot take the admin listener: a per-address cap, and a deadline for the first byte")
    func adminIdleConnections() async throws {
        let harness = try ServerHarness { $0.adminHandshakeTimeout = 1 }
        try await harness.start()
        let port = Int(harness.adminURL.split(separator: ":").last!)!
        let request = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        // 64 idle connections from one address, as many as admin.max_connections.
        var idle: [RawConnection.Held] = []
        for _ in 0..<64 { idle.append(try RawConnection.Held(port: port)) }
        // Another address is still served at once.
        let probe = try RawConnection.Held(port: port, source: "127.0.0.2")
        #expect(await Self.statusLine(probe, request, seconds: 3) == "HTTP/1.1 200 OK", "health denied by another address's idle connections")
        // Past its share the address's connections are closed on accept; the rest after the first-byte deadline.
        let descriptors = idle.map(\.fd)
        let closed = await BlockingPool.shared.run { () -> Int in
            var open = Set(descriptors)
            let deadline = Date().addingTimeInterval(20)  // 1 s is the setting; a bound a loaded machine keeps
            while !open.isEmpty && Date() < deadline {
                for fd in open {
                    var byte: UInt8 = 0
                    if recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0 { open.remove(fd) }
                }
                usleep(20_000)
            }
            return descriptors.count - open.count
        }
        #expect(closed == 64, "\(64 - closed) idle admin connections still open past admin.handshake_timeout")
        idle.removeAll()
        // A timely client from the first address is served again. The address's count drops once
        // the server has finished closing its connections, a moment after their clients read the
        // end: a connection made in between is still closed on accept (CI, once), so it tries again.
        var served: String?
        _ = await waitWhile(upTo: 10, every: 0.05) {
            guard let timely = try? RawConnection.Held(port: port) else { return true }
            served = await Self.statusLine(timely, request, seconds: 3)
            return served != "HTTP/1.1 200 OK"
        }
        #expect(served == "HTTP/1.1 200 OK")
        try await harness.stop()
    }

    @Test("admin.request_timeout and admin.handshake_timeout on the event loop's clock: closed at the deadline, not before; waiting for our answer does not count")
    func adminDeadlinesDriven() throws {
        let loop = EmbeddedEventLoop()
        // First byte: a silent connection closes at the deadline; one that spoke lives on.
        let silent = EmbeddedChannel(handler: FirstByteDeadline(timeout: .seconds(5)), loop: loop)
        let spoke = EmbeddedChannel(handler: FirstByteDeadline(timeout: .seconds(5)), loop: loop)
        for channel in [silent, spoke] { try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).wait() }
        loop.advanceTime(by: .seconds(1))
        try spoke.writeInbound(ByteBuffer(string: "G"))
        loop.advanceTime(by: .milliseconds(3_999))
        #expect(silent.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!silent.isActive && spoke.isActive)
        loop.advanceTime(by: .seconds(100))
        #expect(spoke.isActive)
        // A whole request: idle until the deadline; a request being answered is not timed; the
        // deadline runs again from the answer.
        let idle = EmbeddedChannel(handler: AdminRequestDeadline(timeout: .seconds(60)), loop: loop)
        let answered = EmbeddedChannel(handler: AdminRequestDeadline(timeout: .seconds(60)), loop: loop)
        for channel in [idle, answered] { try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).wait() }
        loop.advanceTime(by: .seconds(10))
        try answered.writeInbound(HTTPRequestPart.end(nil))
        loop.advanceTime(by: .seconds(49))
        #expect(idle.isActive)
        loop.advanceTime(by: .seconds(1))
        #expect(!idle.isActive)
        loop.advanceTime(by: .seconds(90))  // 150 s: still answering
        #expect(answered.isActive, "a connection waiting for our answer was closed")
        try answered.writeOutbound(HTTPResponsePart.end(nil))
        loop.advanceTime(by: .seconds(59))
        #expect(answered.isActive)
        loop.advanceTime(by: .seconds(1))
        #expect(!answered.isActive, "open \(60) s after its answer")
        for channel in [silent, spoke, idle, answered] { _ = try? channel.finish() }
    }

    @Test("admin.request_timeout reaches the listener: a trickled request and an idle connection are closed; a timely one is served")
    func adminRequestTimeout() async throws {
        // Exact times: the test above, on a driven clock. Here a bound a loaded machine keeps (60 s without the setting).
        let harness = try ServerHarness { $0.adminRequestTimeout = 1 }
        try await harness.start()
        let port = Int(harness.adminURL.split(separator: ":").last!)!
        let trickled = try RawConnection.Held(port: port)
        let idle = try RawConnection.Held(port: port)
        #expect(trickled.feed(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n".utf8)))
        let start = Date()
        var trickledOpen = true, idleOpen = true
        while Date().timeIntervalSince(start) < 20, trickledOpen || idleOpen {
            if trickledOpen { trickledOpen = trickled.feed(Array("X-Slow: y\r\n".utf8)) }
            idleOpen = idleOpen && idle.isOpen
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(!trickledOpen, "a trickled request held its connection 20 s with admin.request_timeout = 1")
        #expect(!idleOpen, "an idle connection held 20 s with admin.request_timeout = 1")
        #expect(try await harness.get(harness.adminURL + "/healthz").status == 200)
        try await harness.stop()
    }

    /// Reads everything the server sends until it closes (5 s at most).
    static func readAll(_ fd: Int32) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

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
