import Foundation
import RISCClient
import RISCCore
import RISCPostgres
import RISCSQLite
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

/// Issue 15 §2: Google's unlink calls to the site's RFC 7009 revocation endpoint, on a real
/// receiver (each backend), with a real webhook on loopback.
@Suite("Revocation endpoint (RFC 7009)", .serialized)
struct RevocationEndpointTests {
    typealias Backend = StorePortTests.Backend
    static let clientID = "google-linking-client"
    static let secret = "s3cret+for/Google=0123456789"
    static let path = "/oauth/revoke"

    /// A receiver serving the endpoint on `backend`, optionally with a webhook.
    final class Fixture: @unchecked Sendable {
        let harness: ServerHarness
        let cluster: PostgresCluster?

        init(_ backend: Backend, webhook: String?, invalidPerMinute: Int = 1_000) async throws {
            let directory = Scratch.root.appendingPathComponent("risc-revoke-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(RevocationEndpointTests.secret.utf8).write(to: URL(fileURLWithPath: directory + "/client-secret"))
            try Data(repeating: 6, count: 32).write(to: URL(fileURLWithPath: directory + "/webhook-secret"))
            var cluster: PostgresCluster?
            if backend == .postgresql {
                try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
                cluster = try await PostgresCluster.make()
                try PrivateFiles.writeAtomically(directory + "/token-key", [UInt8](repeating: 4, count: 32))
            }
            self.cluster = cluster
            let storeURL = try cluster.map { try StoreURL($0.url) }
            harness = try ServerHarness(dataDirectory: directory + "/data") {
                $0.linkingRevocationPath = RevocationEndpointTests.path
                $0.linkingGoogleClientID = RevocationEndpointTests.clientID
                $0.linkingClientSecretFile = directory + "/client-secret"
                $0.linkingRevocationTokenTypes = ["refresh_token"]
                $0.invalidPerMinute = invalidPerMinute
                if let webhook {
                    $0.webhookURL = webhook
                    $0.webhookSecretFile = directory + "/webhook-secret"
                }
                if let storeURL {
                    $0.store.url = storeURL
                    $0.tokenKeyFile = directory + "/token-key"
                }
            }
            try await harness.start()
        }

        func revoke(_ form: String, headers: [(name: String, value: String)] = [], contentType: String? = "application/x-www-form-urlencoded")
            async throws -> HTTPResponse
        {
            var all = headers
            if let contentType { all.append(("Content-Type", contentType)) }
            return try await harness.client.perform(
                HTTPRequest(method: "POST", url: harness.publicURL + RevocationEndpointTests.path, headers: all, body: Array(form.utf8)))
        }

        func linkAlice(tokens: [String]) async throws {
            let accounts = harness.receiver.storage.accounts
            _ = try await accounts.link(AccountLink(subject: "alice", userID: "u-alice", sessions: ["s1"]), now: 1_000)
            for token in tokens {
                _ = try await accounts.add(to: "alice", issuer: nil, session: nil, viaGoogle: false, token: token, tokenKind: .linked, now: 1_000)
            }
        }

        func alice() async throws -> AccountSummary {
            try #require(try await harness.receiver.storage.accounts.accounts(subject: "alice").first)
        }

        func stop() async throws {
            try await harness.stop()
            harness.issuer.stop()
            try await cluster?.stop()
        }
    }

    static func form(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
    }

    static func post(_ token: String, hint: String? = nil, secret: String = RevocationEndpointTests.secret) -> String {
        form([("client_id", clientID), ("client_secret", secret), ("token", token)] + (hint.map { [("token_type_hint", $0)] } ?? []))
    }

    static func basic(_ id: String = clientID, _ secret: String = RevocationEndpointTests.secret) -> (name: String, value: String) {
        func encode(_ s: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return s.addingPercentEncoding(withAllowedCharacters: allowed)!
        }
        return ("Authorization", "Basic " + Data("\(encode(id)):\(encode(secret))".utf8).base64EncodedString())
    }

    /// The webhook's side: answers 204, keeps every body.
    final class Webhook: Sendable {
        let recorder = WebhookRecorder(failures: 0)
        let server: LoopbackHTTPServer
        init() throws {
            let recorder = self.recorder
            server = try LoopbackHTTPServer { recorder.handle($0) }
        }
        var bodies: [[UInt8]] { recorder.bodies }
        /// How many deliveries named the token whose fingerprint is `hash` (as the event's subject
        /// or among its `revoke_tokens`).
        func deliveries(naming hash: String) -> Int {
            bodies.filter { body in
                let events = (try? JSONParser.parseObject(body))?["events"]?.arrayValue?.compactMap(\.objectValue) ?? []
                return events.contains { event in
                    event["subject"]?.objectValue?["token"]?.stringValue == hash
                        || (event["revoke_tokens"]?.arrayValue ?? []).contains { $0.objectValue?["token"]?.stringValue == hash }
                }
            }.count
        }
    }

    @Test("issue 15 §2: good and bad client auth, known, unknown and already revoked tokens, malformed forms; recorded before the 200, the webhook told once per token", arguments: Backend.allCases)
    func endpoint(_ backend: Backend) async throws {
        let webhook = try Webhook()
        defer { webhook.server.stop() }
        let f = try await Fixture(backend, webhook: webhook.server.baseURL + "/revoke")
        let linked = ["linked-one-\(UUID().uuidString)", "linked-two-\(UUID().uuidString)"], unknown = "never-issued-\(UUID().uuidString)"
        try await f.linkAlice(tokens: linked)

        // Good calls: client_secret_post (twice: idempotent), client_secret_basic, an unknown token.
        var response = try await f.revoke(Self.post(linked[0], hint: "refresh_token"))
        #expect(response.status == 200 && response.header("cache-control") == "no-store")
        #expect(try await f.revoke(Self.post(linked[0])).status == 200)
        #expect(try await f.revoke(Self.form([("token", linked[1])]), headers: [Self.basic()]).status == 200)
        #expect(try await f.revoke(Self.post(unknown, hint: "not-a-type")).status == 200)  // an unknown hint is ignored (RFC 7009 §2.1)

        // Bad client authentication: 401 invalid_client with WWW-Authenticate.
        for bad in [
            try await f.revoke(Self.post(linked[0], secret: "wrong-secret-0123456789abcd")),
            try await f.revoke(Self.form([("client_id", Self.clientID), ("token", linked[0])])),
            try await f.revoke(Self.form([("token", linked[0])]), headers: [Self.basic(Self.clientID, "nope")]),
            try await f.revoke(Self.form([("token", linked[0])]), headers: [Self.basic("someone-else")]),
            try await f.revoke(Self.form([("token", linked[0])]), headers: [("Authorization", "Bearer abc")]),
        ] {
            #expect(bad.status == 401 && bad.header("www-authenticate")?.hasPrefix("Basic") == true)
            #expect(try JSONParser.parseObject(bad.body)["error"] == "invalid_client")
        }
        // Malformed requests: 400 with the RFC 6749 error body.
        for (body, headers, type, error) in [
            (Self.post(linked[0]), [Self.basic()], "application/x-www-form-urlencoded", "invalid_request"),  // two methods
            (Self.post(linked[0]), [], "application/json", "invalid_request"),
            (Self.post(linked[0]) + "&token=again", [], "application/x-www-form-urlencoded", "invalid_request"),
            (Self.form([("client_id", Self.clientID), ("client_secret", Self.secret)]), [], "application/x-www-form-urlencoded", "invalid_request"),
            (Self.post(linked[0]) + "&x=%zz", [], "application/x-www-form-urlencoded", "invalid_request"),
            (Self.post(linked[0], hint: "access_token"), [], "application/x-www-form-urlencoded", "unsupported_token_type"),
        ] as [(String, [(name: String, value: String)], String, String)] {
            response = try await f.revoke(body, headers: headers, contentType: type)
            #expect(response.status == 400)
            #expect(try JSONParser.parseObject(response.body)["error"]?.stringValue == error, "\(body)")
        }
        #expect(try await f.harness.client.perform(HTTPRequest(url: f.harness.publicURL + Self.path)).status == 405)
        let huge = Self.post(String(repeating: "x", count: 70_000))
        #expect(try await f.revoke(huge).status == 413)

        // Recorded before each 200: three records (the repeat is a duplicate).
        let admin = try f.harness.receiver.storage.store.admin()
        let records = try await admin.counts(now: Date().timeIntervalSince1970)
        #expect(records.pending + records.done == 3)

        // The worker tells the webhook, then marks the linked tokens revoked.
        _ = try await waitWhile { try await f.alice().linkedTokens.active > 0 }
        #expect(try await f.alice().linkedTokens == .init(active: 0, revoked: 2))
        _ = await waitWhile { webhook.bodies.count < 3 }
        try await Task.sleep(for: .milliseconds(200))
        for token in linked + [unknown] { #expect(webhook.deliveries(naming: SHA512.doubleHashBase64(token)) == 1) }
        #expect(webhook.bodies.count == 3)

        // Already revoked: 200, nothing told again.
        #expect(try await f.revoke(Self.post(linked[1], hint: "refresh_token")).status == 200)
        try await Task.sleep(for: .milliseconds(300))
        #expect(webhook.bodies.count == 3)

        // Never a raw token or the secret in the event log or the webhook bodies.
        let lines = f.harness.eventLogLines
        let text = lines.map { JSONValue.object($0).serialized }.joined() + webhook.bodies.map { String(decoding: $0, as: UTF8.self) }.joined()
        for secret in linked + [unknown, Self.secret] { #expect(!text.contains(secret)) }
        let received = lines.filter { $0["source"] == "revocation_endpoint" }
        #expect(received.filter { $0["outcome"] == "accepted" }.count == 3)
        #expect(received.filter { $0["outcome"] == "duplicate" }.count == 2)
        #expect(received.contains { $0["outcome"] == "rejected" && $0["error"] == "invalid_client" && $0["http_status"] == 401 })
        #expect(lines.contains { $0["step"] == "applied" && $0["sink"] == "webhook" && $0["jti"]?.stringValue?.hasPrefix("revocation-") == true })
        try await f.stop()
    }

    @Test("issue 15 §2: without a webhook the token is revoked in the store in the transaction that records the call, before the 200", arguments: Backend.allCases)
    func inline(_ backend: Backend) async throws {
        let f = try await Fixture(backend, webhook: nil, invalidPerMinute: 2)
        let token = "linked-inline-\(UUID().uuidString)"
        try await f.linkAlice(tokens: [token, "another-\(UUID().uuidString)"])
        #expect(try await f.revoke(Self.post(token, hint: "refresh_token")).status == 200)
        #expect(try await f.alice().linkedTokens == .init(active: 1, revoked: 1))
        let applied = f.harness.eventLogLines.filter { $0["step"] == "applied" }
        #expect(applied.last?["actions"]?.arrayValue?.first?.objectValue?["result"] == "revoked the matching token")
        // The invalid-request limiter counts refused calls: past limits.invalid_per_minute, 429.
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(try await f.revoke(Self.post(token, secret: "guess-\(UUID().uuidString)")).status) }
        #expect(statuses.first == 401 && statuses.last == 429, "\(statuses)")
        try await f.stop()
    }

    /// Found: a call with `Content-Encoding: gzip` and a gzipped body was answered 400
    /// `invalid_request` (the body is no form), which tells Google the call is wrong and not to
    /// make it again: the user's unlink would be lost and the linked token stay active. As on the
    /// push path, a coding risc does not decode is 415 (content) or 501 (transfer), naming it, and
    /// nothing is recorded; a plain form under the label is read as it is.
    @Test("a revocation call in a content or transfer coding risc does not decode is 415 or 501 naming it, not a 400; a plain form under the label is read")
    func unsupportedCodings() async throws {
        let f = try await Fixture(.embedded, webhook: nil)
        let linked = "linked-gz-\(UUID().uuidString)"
        try await f.linkAlice(tokens: [linked])
        let gzipped: [UInt8] = [0x1F, 0x8B, 0x08, 0x00] + Array(repeating: 0x9C, count: 40)  // gzip's magic, then bytes no form holds
        let gzip = try await f.harness.client.perform(
            HTTPRequest(
                method: "POST", url: f.harness.publicURL + Self.path,
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Encoding", "gzip")], body: gzipped))
        #expect(gzip.status == 415, "\(gzip.status)")
        #expect(gzip.header("accept-encoding") == "identity", "RFC 9110 §15.5.16: say which codings would do")
        let body = try JSONParser.parseObject(gzip.body)
        #expect(body["error"] == "invalid_request" && body["error_description"]?.stringValue?.contains("Content-Encoding gzip") == true, "\(body)")
        let head = "POST \(Self.path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n"
        let raw = try RawConnection.exchange(
            port: f.harness.publicPort, Array(head.utf8) + Array(String(gzipped.count, radix: 16).utf8) + Array("\r\n".utf8) + gzipped + Array("\r\n0\r\n\r\n".utf8))
        #expect(raw.hasPrefix("HTTP/1.1 501") && raw.contains("Transfer-Encoding gzip"), "\(raw)")
        #expect(try await f.alice().linkedTokens.active == 1, "a refused call revoked nothing")
        #expect(try await f.revoke(Self.post(linked), headers: [("Content-Encoding", "gzip")]).status == 200)
        try await f.stop()
    }

    @Test("a revocation path without the client id or secret is a configuration problem")
    func configuration() {
        var configuration = ReceiverConfiguration()
        configuration.audiences = ["a"]
        configuration.linkingRevocationPath = "revoke"
        let problems = configuration.problems.joined(separator: "\n")
        #expect(problems.contains("linking.revocation_path must start with '/'"))
        #expect(problems.contains("needs linking.google_client_id") && problems.contains("needs linking.client_secret_file"))
    }
}
