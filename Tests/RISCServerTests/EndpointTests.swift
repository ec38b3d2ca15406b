import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

@testable import RISCSQLite

@Suite("risc serve end to end", .serialized)
struct EndpointTests {
    @Test("a valid SET gets 202 with an empty body, is stored, and is logged")
    func accepts() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let jti = "accept-\(UUID().uuidString)"
        let response = try await harness.post(try harness.token(jti: jti))
        #expect(response.status == 202)
        #expect(response.body.isEmpty)
        let stored = try #require(try harness.receiver.storage.store.embedded!.events().record(issuer: harness.issuer.baseURL, jti: jti))
        // Applied in the transaction that stored it: done as soon as the 202 is out.
        #expect(stored.deliveries == 1 && stored.state == "done")
        #expect(stored.remoteAddress == "127.0.0.1")
        #expect(stored.token.hasPrefix("eyJ"))
        let line = try #require(harness.eventLogLines.first { $0["jti"]?.stringValue == jti && $0["step"] == "received" })
        #expect(line["outcome"] == "accepted")
        #expect(line["events"] == ["sessions-revoked"])
        #expect(line["subject"] == "110169484474386276334")
        #expect(line["latency_us"]?.numberValue != nil)
        // One line received, then one applied, in that order.
        #expect(harness.eventLogLines.filter { $0["jti"]?.stringValue == jti }.map { $0["step"]?.stringValue ?? "" } == ["received", "applied"])
        #expect(!harness.eventLogLines.contains { $0.keys.contains("token") })
        #expect(line["txn"] == nil && line["event_time"] == nil)
        // SSF's txn and CAEP's event_timestamp (here in milliseconds, as some transmitters send it) are logged.
        let correlated = try harness.token(jti: jti + "-txn") { claims in
            claims["txn"] = "txn-42"
            if case .object(var events) = claims["events"]!, let type = events.keys.first, case .object(var event) = events[type]! {
                event["event_timestamp"] = .number(1_800_000_000_250)
                events[type] = .object(event)
                claims["events"] = .object(events)
            }
        }
        #expect(try await harness.post(correlated).status == 202)
        let logged = try #require(harness.eventLogLines.first { $0["jti"]?.stringValue == jti + "-txn" && $0["step"] == "received" })
        #expect(logged["txn"] == "txn-42" && logged["event_time"]?.stringValue == "2027-01-15T08:00:00.250000Z", "\(logged)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("every invalid kind gets 400 with the RFC 8935 body, and is logged without the token")
    func rejects() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let good = try harness.token()
        let parts = good.split(separator: ".").map(String.init)
        var flipped = Array(Base64URL.decode(parts[2])!)
        flipped[10] ^= 1
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"risc-test-rs256"}"#.utf8))
        let hs256 = Base64URL.encode(Array(#"{"alg":"HS256","kid":"risc-test-rs256"}"#.utf8))
        let unknownKid = JWSSigner(key: ServerHarness.keys.entry(for: .rs256)!.key, algorithm: .rs256, keyID: "nope")
        let cases: [(String, String)] = [
            (try harness.token { $0["aud"] = "someone-else" }, "invalid_audience"),
            (try harness.token { $0["iss"] = "https://evil.example/" }, "invalid_issuer"),
            (try unknownKid.sign(claims: harness.factory.claims(type: .sessionsRevoked, subject: harness.factory.accountSubject("1"))), "invalid_key"),
            ("\(parts[0]).\(Base64URL.encode(Array(#"{"iss":"x"}"#.utf8))).\(parts[2])", "authentication_failed"),
            ("\(parts[0]).\(parts[1]).\(Base64URL.encode(flipped))", "authentication_failed"),
            ("\(none).\(parts[1]).", "invalid_request"),
            ("\(hs256).\(parts[1]).\(parts[2])", "invalid_request"),
            ("\(parts[0]).\(parts[1])", "invalid_request"),
            (try harness.token { $0["events"] = nil }, "invalid_request"),
            ("", "invalid_request"),
        ]
        for (token, code) in cases {
            let response = try await harness.post(token)
            #expect(response.status == 400, "\(code)")
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("content-language") == "en")
            let body = try JSONParser.parseObject(response.body)
            #expect(body["err"]?.stringValue == code)
            #expect(body["description"]?.stringValue?.isEmpty == false)
        }
        let rejected = harness.eventLogLines.filter { $0["outcome"] == "rejected" }
        #expect(rejected.count == cases.count)
        let log = try String(contentsOfFile: harness.dataDirectory + "/events.log", encoding: .utf8)
        #expect(!log.contains(parts[1]))
        #expect(try harness.receiver.storage.store.embedded!.events().count() == 0)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("a duplicate gets 202 again, is stored once, and its delivery count goes up")
    func duplicates() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let token = try harness.token(jti: "dup-1")
        for _ in 0..<3 { #expect(try await harness.post(token).status == 202) }
        // Concurrent redeliveries land in one group commit and still count once each.
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 { group.addTask { try await harness.post(token).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 202 })
        #expect(try harness.receiver.storage.store.embedded!.events().count() == 1)
        #expect(try harness.receiver.storage.store.embedded!.events().record(issuer: harness.issuer.baseURL, jti: "dup-1")?.deliveries == 23)
        #expect(harness.eventLogLines.filter { $0["outcome"] == "duplicate" }.count == 22)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test(
        "pipelined requests on one connection are answered in order; Connection: close is honoured; a malformed request line gets 400; Expect: 100-continue; a long body off the events path is not read"
    )
    func pipelining() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let port = harness.publicPort
        func request(_ token: String, close: Bool = false) -> String {
            "POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/secevent+jwt\r\nContent-Length: \(token.utf8.count)\r\n"
                + (close ? "Connection: close\r\n" : "") + "\r\n" + token
        }
        // Three requests in one write, the second one invalid, the last asking to close.
        let wire = request(try harness.token(jti: "pipe-1")) + request("not-a-jws") + request(try harness.token(jti: "pipe-3"), close: true)
        let answer = try RawConnection.exchange(port: port, Array(wire.utf8))
        let statuses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
        #expect(statuses == ["202", "400", "202"], "\(answer)")
        #expect(answer.hasSuffix("\r\n\r\n"), "closed after the last answer, with nothing after it")
        let store = try SQLiteEventStore(directory: harness.dataDirectory, logger: Logger(label: "t"))
        defer { store.close() }
        // Answered once durable in the journal; in the store's index just after.
        #expect(await waitWhile { (try? store.record(issuer: harness.issuer.baseURL, jti: "pipe-3")) == nil })
        #expect(try store.record(issuer: harness.issuer.baseURL, jti: "pipe-1") != nil)
        let garbage = try RawConnection.exchange(port: port, Array("BREW /events HTCPCP/1.0\r\n\r\n".utf8))
        #expect(garbage.hasPrefix("HTTP/1.1 400"), "\(garbage)")
        // Expect: 100-continue is answered before the body is sent; an oversized one gets 413 at once.
        let token = try harness.token(jti: "continue-1")
        let interim = try RawConnection.exchange(
            port: port,
            Array(("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: \(token.utf8.count)\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n").utf8),
            then: Array(token.utf8))
        #expect(interim.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202"), "\(interim)")
        let refused = try RawConnection.exchange(
            port: port, Array("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 9000000\r\nExpect: 100-continue\r\n\r\n".utf8))
        #expect(refused.hasPrefix("HTTP/1.1 413"), "\(refused)")
        #expect(!refused.contains("100 Continue"))
        // A long body to a path that is not ours is not read to its end: the server hangs up.
        let sent = try RawConnection.sendUntilClosed(
            port: port, head: "POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 64000000\r\n\r\n", bodyBytes: 64_000_000)
        #expect(sent < 64_000_000, "the server read a 64 MB body to a 404")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("oversized bodies get 413, other methods 405, a missing content type is tolerated and recorded")
    func httpRules() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let big = String(repeating: "a", count: 70_000)
        #expect(try await harness.post(big).status == 413)
        let get = try await harness.get(harness.publicURL + "/events")
        #expect(get.status == 405)
        #expect(get.header("allow") == "POST")
        #expect(try await harness.post(try harness.token(jti: "ct"), contentType: "text/plain").status == 202)
        #expect(try await harness.post(try harness.token(jti: "no-ct"), contentType: nil).status == 202)
        let lines = harness.eventLogLines
        #expect(lines.contains { $0["http_status"] == 413 })
        #expect(lines.first { $0["jti"] == "ct" }?["content_type"] == "text/plain")
        #expect(try await harness.post(try harness.token(), path: "/other").status == 404)
        // Found: a body with a Content-Encoding was read as the SET itself: a gzipped SET was
        // answered 400 "not a compact JWS", which tells a transmitter the SET is invalid and not to
        // send it again (RFC 8935 §2.3): the event was lost for a header risc did not read. A coding
        // risc does not decode is a 415 (RFC 9110 §15.5.16) naming it; identity is no coding, and a
        // body that is a compact JWS all the same is read as one (the label is wrong, not the SET).
        let gzipped = "\u{1F}\u{8B}\u{08}\u{00}" + String(repeating: "\u{7F}x", count: 40)  // gzip's magic, then bytes no token holds
        let gzip = try await harness.post(gzipped, headers: [("Content-Encoding", "gzip")])
        #expect(gzip.status == 415, "\(gzip.status)")
        #expect(gzip.header("accept-encoding") == "identity", "RFC 9110 §15.5.16: say which codings would do")
        #expect(String(decoding: gzip.body, as: UTF8.self).contains("Content-Encoding gzip is not supported"), "\(String(decoding: gzip.body, as: UTF8.self))")
        #expect(try await harness.post(try harness.token(jti: "identity"), headers: [("Content-Encoding", "identity")]).status == 202)
        #expect(try await harness.post(try harness.token(jti: "mislabelled"), headers: [("Content-Encoding", "gzip")]).status == 202)
        #expect(harness.eventLogLines.contains { $0["http_status"] == 415 && $0["err"] == "invalid_request" })
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("health, readiness and metrics on the admin listener")
    func admin() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        _ = try await harness.post(try harness.token(jti: "m1"))
        _ = try await harness.post(try harness.token(jti: "m1"))
        _ = try await harness.post("junk")
        // Sampled until the store answered within the sampler's deadline (2 s of the wall clock,
        // which a loaded machine can miss: the answer is then unknown until the next sample).
        for _ in 0..<10 {
            await harness.receiver.sampleHealth()
            let ready = try JSONParser.parseObject(try await harness.get(harness.adminURL + "/readyz").body)
            if ready["store"]?.objectValue?["queue_depth"] != nil, ready["last_set_at"] != nil { break }
        }
        #expect(try await harness.get(harness.adminURL + "/healthz").status == 200)
        // Found: HEAD (which a load balancer's health check may send, and RFC 9110 §9.1 has every
        // server support where GET is) was 404, marking a healthy receiver down. Same status, no body.
        let adminPort = try #require(URLComponents(string: harness.adminURL)?.port)
        for path in ["/healthz", "/readyz", "/metrics"] {
            let head = try RawConnection.exchange(port: adminPort, Array("HEAD \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            #expect(head.hasPrefix("HTTP/1.1 200"), "HEAD \(path): \(head)")
            #expect(head.hasSuffix("\r\n\r\n"), "HEAD \(path) sent a body: \(head)")
        }
        // Found too: another method on one of its paths was 404, as if the path did not exist;
        // RFC 9110 §15.5.6 has 405 with the methods that do (Allow).
        for (line, expected) in [("POST /healthz", "405"), ("DELETE /metrics", "405"), ("GET /nothing", "404")] {
            let answer = try RawConnection.exchange(port: adminPort, Array("\(line) HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".utf8))
            #expect(answer.hasPrefix("HTTP/1.1 \(expected)"), "\(line): \(answer)")
            if expected == "405" { #expect(answer.lowercased().contains("\r\nallow: get, head\r\n"), "\(line): \(answer)") }
        }
        let ready = try await harness.get(harness.adminURL + "/readyz")
        #expect(ready.status == 200)
        let body = try JSONParser.parseObject(ready.body)
        #expect(body["ready"] == true)
        #expect(body["key_set"]?.objectValue?["source"] == "network")
        #expect(body["store"]?.objectValue?["queue_depth"]?.numberValue != nil)
        #expect(body["last_set_at"]?.stringValue != nil)
        let metrics = String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("risc_sets_total{outcome=\"accepted\"} 1"))
        #expect(metrics.contains("risc_sets_total{outcome=\"duplicate\"} 1"))
        #expect(metrics.contains("risc_sets_total{outcome=\"rejected\",err=\"invalid_request\"} 1"))
        #expect(metrics.contains("risc_verify_duration_seconds_count 3"))
        #expect(metrics.contains("risc_jwks_fetches_total{result=\"fetched\"} 1"))
        #expect(metrics.contains("risc_queue_depth "))
        #expect(ServerHarness.value(metrics, "risc_queue_dead") == 0)
        #expect(metrics.contains("risc_queue_oldest_pending_age_seconds "))
        #expect(metrics.contains("risc_last_set_age_seconds "))
        // The admin paths are not on the public listener.
        #expect(try await harness.get(harness.publicURL + "/metrics").status == 404)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("a restart keeps everything; a duplicate after it is answered 202 and stored once")
    func restart() async throws {
        let first = try ServerHarness()
        try await first.start()
        let token = try first.token(jti: "persist-1")
        #expect(try await first.post(token).status == 202)
        try await first.stop()

        let second = try ServerHarness(dataDirectory: first.dataDirectory, issuer: first.issuer)
        try await second.start()
        #expect(try await second.post(token).status == 202)
        #expect(try second.receiver.storage.store.embedded!.events().count() == 1)
        #expect(try second.receiver.storage.store.embedded!.events().record(issuer: first.issuer.baseURL, jti: "persist-1")?.deliveries == 2)
        let lines = second.eventLogLines
        #expect(lines.filter { $0["jti"] == "persist-1" && $0["step"] == "received" }.map { $0["outcome"]?.stringValue ?? "" } == ["accepted", "duplicate"])
        // The worker applied it once, before the restart.
        #expect(lines.filter { $0["jti"] == "persist-1" && $0["step"] == "applied" }.count == 1)
        #expect(lines.filter { $0["step"] == "serve" }.count == 3)  // started, stopped, started
        try await second.stop()
        first.issuer.stop()
    }

    @Test("with the issuer unreachable and no key set kept: 503 with Retry-After, not ready; then it recovers")
    func keysUnavailable() async throws {
        let harness = try ServerHarness()
        harness.issuer.update { $0.failWith = 503 }
        try await harness.start()
        let token = try harness.token(jti: "later")
        let response = try await harness.post(token)
        #expect(response.status == 503)
        #expect(response.header("retry-after") == "7")
        // Issue 26 §10: the 400's shape, `err` and `description`.
        let body = try JSONParser.parseObject(response.body)
        #expect(body["err"] == "temporarily_unavailable" && body["description"]?.stringValue?.isEmpty == false, "\(body)")
        #expect(try await harness.get(harness.adminURL + "/readyz").status == 503)
        #expect(harness.eventLogLines.contains { $0["outcome"] == "failed" })
        harness.issuer.update { $0.failWith = nil }
        #expect(try await harness.post(token).status == 202)
        #expect(try await harness.get(harness.adminURL + "/readyz").status == 200)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("HTTPS with TLS 1.2+: the endpoint answers over TLS")
    func tls() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-tls-\(UUID().uuidString)")
        let certificate = try TestCertificate(directory: directory)
        let cert = certificate.certificatePath, key = certificate.keyPath
        let harness = try ServerHarness {
            $0.tlsCertificate = cert; $0.tlsKey = key
        }
        try await harness.start()
        #expect(harness.publicURL.hasPrefix("https://"))
        #expect(try await harness.post(try harness.token(jti: "tls-1")).status == 202)
        // Plain HTTP to the TLS port fails.
        let plain = harness.publicURL.replacingOccurrences(of: "https://localhost", with: "http://127.0.0.1")
        await #expect(throws: FetchError.self) {
            let response = try await CurlHTTPClient().perform(HTTPRequest(method: "POST", url: plain + "/events", body: [0x41]))
            if response.status == 202 { Issue.record("plain HTTP accepted") }
            throw FetchError(url: plain, "answered \(response.status)")
        }
        let metrics = String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"risc_tls_certificate_expiry_timestamp_seconds{listener="public"} "#))
        let ready = try JSONParser.parseObject(try await harness.get(harness.adminURL + "/readyz").body)
        #expect(ready["tls"]?.objectValue?["not_after"]?.stringValue?.hasSuffix("Z") == true)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("the receiver's own lines and its certificate-expiry warning read its clock, not the system's")
    func lifecycleTimesFromTheClock() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-tls-clock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)  // valid for a day from now
        let cert = certificate.certificatePath, key = certificate.keyPath
        let harness = try ServerHarness {
            $0.tlsCertificate = cert; $0.tlsKey = key
        }
        // Thirty days before now by the receiver's clock, the certificate has a month left: no warning.
        let clock = TestClock((systemNow() - 30 * 86_400).rounded(.down))
        harness.clock = clock
        let log = CapturedLog()
        harness.log = log
        try await harness.start()
        let started = harness.eventLogLines.first { $0["step"] == "serve" && $0["outcome"] == "started" }
        #expect(started?["ts"]?.stringValue == Timestamp.iso8601(clock.now), "\(String(describing: started))")
        let warnings = log.lines.withLock { $0 }.filter { $0.contains("expires within 14 days") || $0.contains("has expired") }
        #expect(warnings.isEmpty, "\(warnings)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("the event log turns a segment by the receiver's clock (event_log_rotate_interval), not the system's")
    func rotationByTheClock() async throws {
        let harness = try ServerHarness { $0.eventLogRotateInterval = 3_600 }
        let clock = TestClock(systemNow().rounded(.down))
        harness.clock = clock
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "segment-1") { $0["iat"] = .number(clock.now) }).status == 202)
        clock.advance(3_601)
        #expect(try await harness.post(try harness.token(jti: "segment-2") { $0["iat"] = .number(clock.now) }).status == 202)
        let rotated = await waitWhile(upTo: 10) { !harness.eventLogLines.contains { $0["step"] == "log" && $0["outcome"] == "rotated" } }
        #expect(rotated, "no rotation an hour later by the receiver's clock")
        let line = harness.eventLogLines.first { $0["step"] == "log" && $0["outcome"] == "rotated" }
        #expect(line?["ts"]?.stringValue == Timestamp.iso8601(clock.now), "\(String(describing: line))")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("a renewed certificate is picked up without a restart (SIGHUP's reload); a broken pair is refused and the one in use stays")
    func tlsReload() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-tls-\(UUID().uuidString)")
        let first = try TestCertificate(directory: directory.appendingPathComponent("first"))
        let renewed = try TestCertificate(directory: directory.appendingPathComponent("renewed"))
        let cert = directory.appendingPathComponent("live-cert.pem").path, key = directory.appendingPathComponent("live-key.pem").path
        try first.install(certificateAt: cert, keyAt: key)
        let harness = try ServerHarness {
            $0.tlsCertificate = cert; $0.tlsKey = key
        }
        try await harness.start()
        func post(trusting bundle: String, jti: String) async throws -> Int {
            let request = HTTPRequest(
                method: "POST", url: harness.publicURL + "/events", headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(try harness.token(jti: jti).utf8))
            return try await CurlHTTPClient.patient(caBundlePath: bundle).perform(request).status
        }
        #expect(try await post(trusting: first.certificatePath, jti: "before-renewal") == 202)
        await #expect(throws: FetchError.self) { _ = try await post(trusting: renewed.certificatePath, jti: "not-yet") }

        try renewed.install(certificateAt: cert, keyAt: key)
        #expect(harness.receiver.reloadTLS())
        #expect(try await post(trusting: renewed.certificatePath, jti: "after-renewal") == 202)
        await #expect(throws: FetchError.self) { _ = try await post(trusting: first.certificatePath, jti: "old-certificate") }

        // A key that does not match the certificate, then an unreadable certificate: refused, the renewed pair stays.
        try first.install(certificateAt: cert, keyAt: key, keyFrom: renewed.keyPath)
        #expect(!harness.receiver.reloadTLS())
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: cert))
        #expect(!harness.receiver.reloadTLS())
        #expect(try await post(trusting: renewed.certificatePath, jti: "still-renewed") == 202)
        let lines = harness.eventLogLines.filter { $0["step"] == "tls" }
        #expect(lines.map { $0["outcome"]?.stringValue ?? "" } == ["reloaded", "failed", "failed"])
        #expect(lines.first?["not_after"]?.stringValue?.hasSuffix("Z") == true)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("configuration problems are all reported at once")
    func configurationProblems() {
        var configuration = ReceiverConfiguration()
        configuration.port = 70_000
        configuration.eventsPath = "events"
        configuration.tlsKey = "/k.pem"
        configuration.algorithms = ["HS256"]
        let problems = configuration.problems
        #expect(problems.count >= 5)
        #expect(problems.contains { $0.contains("audience") })
        #expect(throws: ConfigurationError.self) { _ = try Receiver(configuration: configuration, logger: .init(label: "x")) }
    }
}
