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
        await harness.receiver.sampleHealth()
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

@Suite("Admin account API", .serialized)
struct AdminAccountAPITests {
    static let token = "admin-token-0123456789abcdef"
    static let auth = ("Authorization", "Bearer " + token)

    /// A file holding `contents` (the suite's admin token and a newline by default), for
    /// `admin.token_file`; the caller removes it.
    static func tokenFile(_ contents: [UInt8] = Array((token + "\n").utf8)) throws -> String {
        let path = Scratch.root.appendingPathComponent("risc-admin-\(UUID().uuidString)").path
        try Data(contents).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A started harness with the account API on (the suite's token), and that token's file,
    /// which the caller removes.
    static func startedWithAccountAPI() async throws -> (harness: ServerHarness, tokenFile: String) {
        let tokenFile = try tokenFile()
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        return (harness, tokenFile)
    }

    /// POSTs `body` to the account API's `path` with the suite's token: the status and the answer's text.
    static func post(_ body: String, to path: String, on harness: ServerHarness) async throws -> (status: Int, text: String) {
        let response = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: [auth], body: Array(body.utf8)))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test("register accounts, sessions and tokens over the authenticated API; an event then acts on them")
    func api() async throws {
        let tokenFile = try Self.tokenFile()
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        let auth = Self.auth
        func post(_ path: String, _ body: String, headers: [(name: String, value: String)]) async throws -> HTTPResponse {
            try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: headers, body: Array(body.utf8)))
        }
        #expect(try await post("/admin/accounts", #"{"subject":"110169484474386276334","user_id":"u-9"}"#, headers: []).status == 401)
        #expect(try await post("/admin/accounts", #"{"subject":"x","user_id":"u"}"#, headers: [("Authorization", "Bearer wrong")]).status == 401)
        #expect(try await post("/admin/accounts", #"{"subject":"x","user_id":"u"}"#, headers: [("Authorization", "Bearer " + Self.token.uppercased())]).status == 401)
        let put = try await harness.client.perform(HTTPRequest(method: "PUT", url: harness.adminURL + "/admin/accounts/someone", headers: [auth], body: []))
        #expect(put.status == 405 && put.header("allow") == "DELETE, GET, HEAD", "\(put.status) \(put.header("allow") ?? "-")")
        // Found: "bearer TOKEN" (curl users type it) was 401; the scheme is case-insensitive (RFC 9110 §11.1).
        for (index, scheme) in ["bearer ", "BEARER  "].enumerated() {
            let body = #"{"subject":"scheme-\#(index)","user_id":"u"}"#
            #expect(try await post("/admin/accounts", body, headers: [("Authorization", scheme + Self.token)]).status == 201, "\(scheme)")
        }
        let link = #"{"subject":"110169484474386276334","user_id":"u-9","issuer":""# + harness.issuer.baseURL + #""}"#
        #expect(try await post("/admin/accounts", link, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts", #"{"subject":1}"#, headers: [auth]).status == 400)
        #expect(try await post("/admin/accounts/110169484474386276334/sessions", #"{"session_id":"web-1"}"#, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/110169484474386276334/tokens", #"{"token":"1//0gadmin-token","kind":"google_refresh"}"#, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/nobody/sessions", #"{"session_id":"s"}"#, headers: [auth]).status == 404)
        let shown = try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/110169484474386276334", headers: [auth]))
        let account = try JSONParser.parseObject(shown.body)
        #expect(account["user_id"] == "u-9")
        #expect(account["sessions"]?.objectValue?["open"] == 1)
        #expect(account["tokens"]?.objectValue?["google_refresh"]?.objectValue?["active"] == 1)

        // An event about the account (issued now, after the session opened) ends the session.
        #expect(try await harness.post(try harness.token(jti: "act-1", type: .tokensRevoked)).status == 202)
        var ended = false
        for _ in 0..<1_500 where !ended {
            let now = try JSONParser.parseObject(
                try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/110169484474386276334", headers: [auth])).body)
            ended = now["sessions"]?.objectValue?["open"] == 0 && now["tokens"]?.objectValue?["google_refresh"]?.objectValue?["revoked"] == 1
            if !ended { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(ended)
        // Unlinking (issue 15): the account goes with its sessions and tokens; a second time, 404.
        let unlinkURL = harness.adminURL + "/admin/accounts/110169484474386276334"
        #expect(try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL)).status == 401)
        let unlinked = try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL, headers: [auth]))
        #expect(unlinked.status == 200 && String(decoding: unlinked.body, as: UTF8.self) == #"{"unlinked":1}"#)
        #expect(try await harness.client.perform(HTTPRequest(url: unlinkURL, headers: [auth])).status == 404)
        #expect(try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL, headers: [auth])).status == 404)
        // Found: the lines the API writes had outcomes (`unlinked`, `linked_tokens_revoked`) that
        // `risc tail --outcome` refused as unknown. Every line written has an outcome it knows.
        #expect(try await post("/admin/accounts", link, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/110169484474386276334/linked-tokens/revoke", "{}", headers: [auth]).status == 200)
        let outcomes = Set(harness.eventLogLines.compactMap { $0["outcome"]?.stringValue })
        #expect(outcomes.isSuperset(of: ["unlinked", "linked_tokens_revoked"]), "\(outcomes)")
        let unknown = outcomes.filter { !EventLogRecord.Outcome.all.contains(.init(rawValue: $0)) }
        #expect(unknown.isEmpty, "outcomes risc tail --outcome refuses: \(unknown)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: a session's start was the time the site registered it with risc. A login server that
    /// registers sessions from a queue, seconds or minutes late, registered a session opened before
    /// a hijacking after the event's time: "end sessions" then spared it (only sessions opened at or
    /// before the event end). The site may now say when the session began (`created_at`).
    @Test("a session registered late with the time it began is ended by an event after that time; a bad created_at is a 400")
    func sessionCreatedAt() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let auth = Self.auth
        func call(_ path: String, _ body: String) async throws -> (status: Int, text: String) { try await Self.post(body, to: path, on: harness) }
        let base = "/admin/accounts/110169484474386276334", now = Date().timeIntervalSince1970
        let link = #"{"subject":"110169484474386276334","user_id":"u-1","issuer":""# + harness.issuer.baseURL + #""}"#
        #expect(try await call("/admin/accounts", link).status == 201)
        for (body, expected) in [
            (#"{"session_id":"s","created_at":"yesterday"}"#, "'created_at' must be a number"),
            (#"{"session_id":"s","created_at":-1}"#, "'created_at'"),
            (#"{"session_id":"s","created_at":\#(Int(now * 1_000))}"#, "'created_at'"),
        ] {
            let answer = try await call(base + "/sessions", body)
            #expect(answer.status == 400 && answer.text.contains(expected), "\(body): \(answer.status) \(answer.text)")
        }
        #expect(try await call(base + "/sessions", #"{"session_id":"opened-an-hour-ago","created_at":\#(Int(now) - 3_600)}"#).status == 201)
        #expect(try await call(base + "/sessions", #"{"session_id":"opened-now"}"#).status == 201)
        // A hijacking ten minutes ago: the session opened an hour ago ends; the one opened now stays.
        #expect(try await harness.post(try harness.token(jti: "late-1") { $0["iat"] = .number(now - 600) }).status == 202)
        var sessions: JSONObject?
        for _ in 0..<1_500 where sessions?["ended"] != 1 {
            let account = try JSONParser.parseObject(try await harness.client.perform(HTTPRequest(url: harness.adminURL + base, headers: [auth])).body)
            sessions = account["sessions"]?.objectValue
            if sessions?["ended"] != 1 { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(sessions?["ended"] == 1 && sessions?["open"] == 1, "\(String(describing: sessions))")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: `DELETE /admin/accounts/{subject}` read `?issuer=` and ignored every other query
    /// parameter, so a misspelt `?isuer=https://other.example` (meant to remove one issuer's
    /// account) removed the subject's accounts under every issuer; `?issuer=` (empty) was taken as
    /// an issuer; and `GET` ignored `?issuer=` altogether, showing another issuer's account. The
    /// query is read as strictly as the bodies are: `issuer` only, checked as linking checks it.
    @Test("the account API's query is strict: an unknown parameter or an empty issuer is a 400 and removes nothing; GET and DELETE both honour issuer")
    func strictQuery() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        for issuer in ["https://accounts.google.com", "https://other.example"] {
            #expect(try await Self.post(#"{"subject":"shared-sub","user_id":"u-\#(issuer.count)","issuer":"\#(issuer)"}"#, to: "/admin/accounts", on: harness).status == 201)
        }
        func call(_ method: String, _ query: String) async throws -> (status: Int, text: String) {
            let response = try await harness.client.perform(HTTPRequest(method: method, url: harness.adminURL + "/admin/accounts/shared-sub" + query, headers: [Self.auth]))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }
        for (query, says) in [
            ("?isuer=https://other.example", "unknown query parameter 'isuer' (known: issuer)"), ("?issuer=", "'issuer' must not be empty"),
            ("?issuer=a&issuer=b", "'issuer' given twice"),
        ] {
            for method in ["DELETE", "GET"] {
                let answer = try await call(method, query)
                #expect(answer.status == 400 && answer.text.contains(says), "\(method) \(query): \(answer.status) \(answer.text)")
            }
        }
        #expect(try await call("GET", "?issuer=https://other.example").text.contains(#""issuer":"https://other.example""#))
        let removed = try await call("DELETE", "?issuer=https://other.example")
        #expect(removed.status == 200 && removed.text == #"{"unlinked":1}"#, "\(removed.text)")
        #expect(try await call("GET", "").text.contains(#""issuer":"https://accounts.google.com""#))
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: `POST /admin/accounts` linking a Google account that was linked to another of the
    /// site's users answered `{"status":"linked"}` as for a new link: the site's login server never
    /// learnt that a Google account moved between its users (a mistyped user id, or a sign-in that
    /// should be looked at). `risc accounts link` says "was …"; the API now names the previous user.
    @Test("linking a Google account linked to another user names that user in the answer; a new link or the same user names none")
    func linkNamesThePreviousUser() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        func link(_ user: String) async throws -> JSONObject {
            let answer = try await Self.post(#"{"subject":"110169484474386276334","user_id":"\#(user)"}"#, to: "/admin/accounts", on: harness)
            #expect(answer.status == 201, "\(answer.text)")
            return try JSONParser.parseObject(Array(answer.text.utf8))
        }
        #expect(try await link("u-1") == ["status": "linked"])
        #expect(try await link("u-1") == ["status": "linked"])
        #expect(try await link("u-2") == ["status": "linked", "previous_user_id": "u-1"])
        // One audit line, for the move only.
        let moves = harness.eventLogLines.filter { $0["step"] == "site" }
        #expect(
            moves.count == 1 && moves.first?["outcome"] == "relinked" && moves.first?["source"] == "admin_api"
                && moves.first?["user_id"] == "u-2" && moves.first?["previous_user_id"] == "u-1", "\(moves)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: only `POST /admin/accounts` checked its body. The other three took what they knew and
    /// dropped the rest: `{"tokenz": [...]}` (a typo of `tokens`) revoked **every** linked token of
    /// the account and queued an unlink notice to Google for each, as a body naming neither list
    /// does; `"kind": 5` stored a linked token as a Google refresh token; `"via_google": "false"` and
    /// a misspelt `via_gogle` left a session one a `tokens-revoked` event ends; `"issuer": 5` went to
    /// the Google account of that subject.
    @Test("the sessions, tokens and linked-token endpoints refuse unknown members and wrong types, as linking does; nothing is changed")
    func strictBodies() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let auth = Self.auth
        func call(_ path: String, _ body: String) async throws -> (status: Int, text: String) { try await Self.post(body, to: path, on: harness) }
        let subject = "110169484474386276334", base = "/admin/accounts/110169484474386276334"
        let link = #"{"subject":"\#(subject)","user_id":"u-1","linked_tokens":["lt-1","lt-2"]}"#
        #expect(try await call("/admin/accounts", link).status == 201)
        for (path, body, expected) in [
            // Found: each of these was "body is not a JSON object", for bodies that hold one: why, and where.
            ("/sessions", #"{"session_id":"web-1"}{}"#, "trailing characters after JSON value at byte 22"),
            ("/sessions", #"{"session_id":"web-1","session_id":"web-2"}"#, "duplicate member name at byte"),
            ("/sessions", #"["web-1"]"#, "body is not a JSON object: expected a JSON object"),
            ("/linked-tokens/revoke", #"{"tokenz":["lt-1"]}"#, "unknown member 'tokenz' (known: issuer, token_hashes, token_type, tokens)"),
            ("/linked-tokens/revoke", #"{"tokens":["lt-1"],"issuer":5}"#, "'issuer' must be a string"),
            ("/linked-tokens/revoke", #"{"tokens":["lt-1"],"token_type":1}"#, "'token_type' must be a string"),
            ("/tokens", #"{"token":"rt-1","kind":5}"#, "'kind' must be a string"),
            ("/tokens", #"{"token":"rt-1","kind":"linked","via_google":true}"#, "unknown member 'via_google' (known: issuer, kind, token)"),
            ("/tokens", #"{"token":7}"#, "'token' must be a string"),
            ("/sessions", #"{"session_id":"web-1","via_google":"false"}"#, "'via_google' must be true or false"),
            ("/sessions", #"{"session_id":"web-1","via_gogle":false}"#, "unknown member 'via_gogle' (known: created_at, issuer, session_id, via_google)"),
            ("/sessions", #"{"session_id":"web-1","issuer":5}"#, "'issuer' must be a string"),
            ("/sessions", #"{"session_id":"web-1","issuer":" https://accounts.google.com"}"#, "'issuer' must not begin or end with white space"),
            ("/sessions", #"{"session_id":3}"#, "'session_id' must be a string"),
        ] {
            let answer = try await call(base + path, body)
            #expect(answer.status == 400 && answer.text.contains(expected), "\(path) \(body): \(answer.status) \(answer.text)")
        }
        // Nothing was changed by any of them.
        let shown = try JSONParser.parseObject(
            try await harness.client.perform(HTTPRequest(url: harness.adminURL + base, headers: [auth])).body)
        #expect(shown["sessions"]?.objectValue?["open"] == 0, "\(shown)")
        #expect(shown["tokens"]?.objectValue?["linked"]?.objectValue?["active"] == 2, "\(shown)")
        #expect(shown["tokens"]?.objectValue?["google_refresh"]?.objectValue?["active"] == 0, "\(shown)")
        // What is right still works.
        #expect(try await call(base + "/sessions", #"{"session_id":"web-1","via_google":false}"#).status == 201)
        #expect(try await call(base + "/tokens", #"{"token":"rt-1","kind":"google_refresh"}"#).status == 201)
        let revoked = try await call(base + "/linked-tokens/revoke", #"{"tokens":["lt-1"]}"#)
        #expect(revoked.status == 200 && revoked.text.contains(#""revoked":1"#), "\(revoked)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: a secret file saved with a UTF-8 byte-order mark (Windows' Notepad) kept the mark in
    /// the secret: the admin token never matched what the site sent (401 for every call), and a
    /// webhook secret or a client secret would have been as wrong.
    @Test("a secret file starting with a byte-order mark is read without it: the admin token matches")
    func secretWithByteOrderMark() async throws {
        let tokenFile = try Self.tokenFile([0xEF, 0xBB, 0xBF] + Array((Self.token + "\r\n").utf8))
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        let response = try await harness.client.perform(
            HTTPRequest(url: harness.adminURL + "/admin/accounts/nobody", headers: [Self.auth]))
        #expect(response.status == 404, "\(response.status): the token did not match")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("the API records its times by the receiver's clock: a session it opens is ended by a SET issued at that moment by that clock")
    func apiTimesFromTheClock() async throws {
        let tokenFile = try Self.tokenFile()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        // The receiver's clock an hour behind the system's: what the API records must follow it,
        // or a session opened "now" would look an hour newer than a SET issued at the same moment.
        let clock = TestClock(systemNow() - 3_600)
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        harness.clock = clock
        try await harness.start()
        let auth = Self.auth
        let subject = "110169484474386276334"
        func post(_ path: String, _ body: String) async throws -> HTTPResponse {
            try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: [auth], body: Array(body.utf8)))
        }
        #expect(try await post("/admin/accounts", #"{"subject":"\#(subject)","user_id":"u-7","issuer":"\#(harness.issuer.baseURL)"}"#).status == 201)
        #expect(try await post("/admin/accounts/\(subject)/sessions", #"{"session_id":"web-7"}"#).status == 201)
        let jti = "admin-clock-1"
        let token = try harness.token(jti: jti, type: .sessionsRevoked) { $0["iat"] = .number(clock.now.rounded(.down)) }
        #expect(try await harness.post(token).status == 202)
        #expect(await waitWhile { !harness.eventLogLines.contains { $0["jti"]?.stringValue == jti && $0["step"] == "applied" } })
        let shown = try JSONParser.parseObject(
            try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/\(subject)", headers: [auth])).body)
        #expect(shown["sessions"]?.objectValue?["open"] == 0, "the session the API opened at the clock's now outlived a SET issued then: \(shown)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("a journaled SET's commit time and its received line's latency end when it was durable, not when the index took it (the writer's linger)")
    func commitTimedToDurability() async throws {
        let clock = TestClock(systemNow().rounded(.down))
        let harness = try ServerHarness()
        harness.clock = clock
        try await harness.start()
        let jti = "durable-time-1"
        // The writer is held (its database's write lock, by a thread of the test's) while the SET is
        // made durable and answered; the receiver's clock moves on before the index takes it.
        let events = try #require(try harness.receiver.storage.store.embedded?.events())
        let lock = events.writer.writeLock
        let writer = await HeldOnThread(lock: { lock.lock() }, unlock: { lock.unlock() })
        // Not `harness.post`: it waits for the index after a 202, which the held writer holds back.
        let answer = try await harness.client.perform(
            HTTPRequest(
                method: "POST", url: harness.publicURL + harness.configuration.eventsPath, headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(try harness.token(jti: jti).utf8)))
        #expect(answer.status == 202)
        clock.advance(1)
        writer.release()
        await harness.indexed()
        let metrics = String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
        #expect(ServerHarness.value(metrics, "risc_commit_duration_seconds_count") == 1)
        #expect(ServerHarness.value(metrics, "risc_commit_duration_seconds_sum") == 0, "the commit time ran on to the index")
        let received = try #require(harness.eventLogLines.first { $0["jti"]?.stringValue == jti && $0["step"] == "received" })
        #expect(received["latency_us"] == 0, "\(received)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("issue 15 §4: POST /admin/linking/app-flip checks a link, builds the redirect, and refuses a user whose Google sign-in risc suspended")
    func appFlip() async throws {
        let tokenFile = try Self.tokenFile()
        let harness = try ServerHarness {
            $0.adminTokenFile = tokenFile
            $0.linkingGoogleClientID = "google-client"
        }
        try await harness.start()
        let auth = Self.auth
        func check(_ body: JSONObject) async throws -> JSONObject {
            let response = try await harness.client.perform(
                HTTPRequest(
                    method: "POST", url: harness.adminURL + "/admin/linking/app-flip", headers: [auth], body: Array(JSONValue.object(body).serialized.utf8)))
            #expect(response.status == 200)
            return try JSONParser.parseObject(response.body)
        }
        let redirect = "https://oauth-redirect.googleusercontent.com/a/com.google.OPA"
        let link = AppFlipLink.make(redirect: redirect, state: "s1")
        var verdict = try await check(["url": .string(link), "code": "abc"])
        #expect(verdict["acceptable"] == true && verdict["redirect"]?.stringValue == redirect + "?code=abc&state=s1")
        verdict = try await check(["url": .string(link), "outcome": "cancel"])
        #expect(verdict["error"] == "cancelled")
        // A user whose Google account was disabled: risc suspended its sign-in; relinking is refused.
        _ = try await harness.receiver.storage.accounts.link(
            AccountLink(issuer: harness.issuer.baseURL, subject: "110169484474386276334", userID: "u-1"), now: 1_000)
        #expect(try await harness.post(try harness.token(jti: "disabled", type: .accountDisabled)).status == 202)
        _ = try await waitWhile { try await harness.receiver.storage.accounts.googleSignInSuspended(userID: "u-1") == false }
        verdict = try await check(["url": .string(link), "code": "abc", "user_id": "u-1"])
        #expect(verdict["acceptable"] == false && verdict["error"] == "unrecoverable")
        // Found: a user ID that was not a string (or a misspelt member) was passed over, and the
        // suspended user's link came back acceptable. Refused now, as every admin body is read.
        for (body, expected) in [
            (#"{"url":"\#(link)","code":"abc","user_id":1}"#, "'user_id' must be a string"),
            (#"{"url":"\#(link)","code":"abc","userid":"u-1"}"#, "unknown member 'userid' (known: code, outcome, url, user_id)"),
        ] {
            let refused = try await harness.client.perform(
                HTTPRequest(method: "POST", url: harness.adminURL + "/admin/linking/app-flip", headers: [auth], body: Array(body.utf8)))
            #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains(expected), "\(body)")
        }
        let evil = AppFlipLink.make(redirect: redirect + ".evil.example", state: "s1")
        verdict = try await check(["url": .string(evil), "code": "abc"])
        #expect(verdict["error"] == "invalid_request" && verdict["redirect"] == .null)
        let unauthenticated = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + "/admin/linking/app-flip", body: Array("{}".utf8)))
        #expect(unauthenticated.status == 401)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("without a token file the API is not there")
    func off() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let response = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + "/admin/accounts", body: Array("{}".utf8)))
        #expect(response.status == 404)
        try await harness.stop()
        harness.issuer.stop()
    }
}

@Suite("Negative tokens against the server", .serialized)
struct NegativeTokenTests {
    @Test("every --negative kind gets the answer it names")
    func allKinds() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        #expect(NegativeTokens.kinds.count == 10)
        for kind in NegativeTokens.kinds {
            let token = try #require(try NegativeTokens.make(kind.name, factory: harness.factory))
            let response = try await harness.post(token)
            let parts = kind.expected.split(separator: " ")
            #expect(response.status == Int(parts[0]), "\(kind.name)")
            if parts.count > 1 {
                #expect(try JSONParser.parseObject(response.body)["err"]?.stringValue == String(parts[1]), "\(kind.name)")
            }
        }
        #expect(try harness.receiver.storage.store.embedded!.events().count() == 0)
        #expect(try NegativeTokens.make("nonsense", factory: harness.factory) == nil)
        try await harness.stop()
        harness.issuer.stop()
    }
}

/// A plain TCP exchange: write the bytes, read until the server closes (or 5 s pass).
enum RawConnection {
    /// Sends `head`, then zeros up to `bodyBytes`, until a send fails (the server closed); returns
    /// how many body bytes went out.
    static func sendUntilClosed(port: Int, head: String, bodyBytes: Int) throws -> Int {
        let fd = try connected(port: port)
        defer { close(fd) }
        _ = Array(head.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let chunk = [UInt8](repeating: 0, count: 65_536)
        var sent = 0
        while sent < bodyBytes {
            let count = chunk.withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, bodyBytes - sent), Int32(MSG_NOSIGNAL)) }
            if count <= 0 { break }
            sent += count
        }
        return sent
    }

    /// Sends `bytes`; with `then`, waits for the first answer bytes before sending those.
    static func exchange(port: Int, _ bytes: [UInt8], then more: [UInt8]? = nil) throws -> String {
        let fd = try connected(port: port)
        defer { close(fd) }
        try sendAll(fd, bytes)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        if let more {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += buffer[0..<count] }
            try sendAll(fd, more)
        }
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// A connection kept open across exchanges.
    final class Held {
        let fd: Int32
        /// `source`: the local address to connect from (any of 127/8 works on loopback).
        init(port: Int, source: String? = nil) throws { fd = try RawConnection.connected(port: port, source: source) }
        deinit { close(fd) }

        /// Sends `bytes` and reads one bodiless answer (to the blank line); nil when the server
        /// closed (or reset) the connection first.
        func exchange(_ bytes: [UInt8]) -> String? {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !received.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return nil }
                received += buffer[0..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }

        /// Sends `bytes`; false once the server has closed the connection.
        func feed(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count && isOpen
        }

        /// Whether the server has not closed its side (nothing unread is expected).
        var isOpen: Bool {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
            return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
        }
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw POSIXError(.EIO)
        }
    }

    static func connected(port: Int, source: String? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                throw POSIXError(.EADDRNOTAVAIL)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        return fd
    }
}
