import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

/// Issue 29: "webhook" as an action a site chooses per event and per transmitter
/// (`webhook.scope = rows`), beside the actions risc applies to its own accounts.
@Suite("webhook as a row's action", .serialized)
struct WebhookRowsTests {
    typealias Backend = StorePortTests.Backend

    @Test(
        "with webhook.scope = rows, an event whose row names webhook is delivered there (retried until it answers) and its other actions applied here; Google's events are applied inline and never sent",
        arguments: Backend.allCases)
    func rowsChooseTheWebhook(_ backend: Backend) async throws {
        let okta = try TransmitterTests.SSFTransmitter()
        let site = try await WebhookSite(backend, failures: 1)
        let recorder = site.recorder
        let harness = try ServerHarness(dataDirectory: site.dataDirectory) {
            site.configure(&$0)
            $0.transmitters = [okta.settings()]
            $0.actionTable.set(.sessionRevoked, reason: "", actions: [.endSession, .webhook], issuers: [okta.issuer.baseURL])
            $0.webhookScope = .rows
            $0.retry.baseDelay = 0.05
            $0.retry.maximumDelay = 0.2
        }
        try await harness.start()
        let accounts = harness.receiver.storage.accounts
        let googleUser = "110169484474386276334"
        _ = try await accounts.link(AccountLink(issuer: harness.issuer.baseURL, subject: googleUser, userID: "u-g", sessions: ["g1", "g2"]), now: 1_000)
        _ = try await accounts.link(AccountLink(issuer: okta.issuer.baseURL, subject: "ada", userID: "u-ada", sessions: ["s1", "s2"]), now: 1_000)

        // Google's sessions-revoked: the default row, applied in the transaction that stores it.
        #expect(try await harness.post(try harness.token(jti: "google-1")).status == 202)
        #expect(try await accounts.accounts(subject: googleUser).first?.openSessions == 0)

        // Okta's session-revoked of s2: its row names the webhook.
        let token = try okta.token(jti: "okta-1") {
            $0["sub_id"] = nil
            $0["events"] = .object([
                EventType.sessionRevoked.uri: ["subject": ["user": okta.factory.accountSubject("ada"), "session": ["format": "opaque", "id": "s2"]]]
            ])
        }
        #expect(try await harness.post(token).status == 202)
        let done = await waitWhile { recorder.bodies.count < 2 || harness.eventLogLines.last { $0["jti"] == "okta-1" }?["outcome"] != "applied" }
        #expect(done, "\(harness.eventLogLines.filter { $0["jti"] == "okta-1" }.map { JSONValue.object($0).serialized })")
        #expect(try await accounts.accounts(subject: "ada").first?.openSessions == 1)

        let bodies = try recorder.bodies.map { try JSONParser.parseObject($0) }
        #expect(bodies.count == 2 && bodies.allSatisfy { $0["jti"] == "okta-1" }, "Google's SET is never sent")
        let body = try #require(bodies.last)
        #expect(body["applied_by_risc"] == true)
        let event = try #require(body["events"]?.arrayValue?.first?.objectValue)
        #expect(event["type"] == .string(EventType.sessionRevoked.uri))
        #expect(event["actions"] == ["end_session"])

        // The first attempt failed before anything was applied; the second applied both.
        let applied = harness.eventLogLines.filter { $0["jti"] == "okta-1" && $0["step"] == "applied" }
        #expect(applied.map { $0["outcome"]?.stringValue ?? "" } == ["failed", "applied"])
        let results = applied.last?["actions"]?.arrayValue?.compactMap { $0.objectValue?["result"]?.stringValue } ?? []
        #expect(results == ["ended the named session", "delivered to the webhook"], "\(results)")
        #expect(applied.last?["sink"] == nil)
        #expect(harness.eventLogLines.first { $0["jti"] == "google-1" && $0["step"] == "applied" }?["outcome"] == "applied")

        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
        try await site.stop()
    }

    @Test("a row naming webhook needs webhook.url and webhook.scope = rows; the configuration says which")
    func configurationProblems() {
        var configuration = ReceiverConfiguration()
        configuration.audiences = [SETFactory.defaultAudience]
        #expect(configuration.problems.isEmpty, "\(configuration.problems)")
        configuration.actionTable.set(.credentialChange, reason: "", actions: [.heightenMonitoring, .webhook], issuers: ["https://okta.example"])
        #expect(configuration.problems.contains { $0.contains("names the action webhook, but webhook.url is not set") })
        configuration.webhookURL = "https://site.example/risc-webhook"
        configuration.webhookSecretFile = "/etc/risc/webhook-secret"
        #expect(configuration.problems.contains { $0.contains("set webhook.scope = rows") })
        configuration.webhookScope = .rows
        #expect(configuration.problems.isEmpty, "\(configuration.problems)")
        configuration.webhookURL = nil
        configuration.webhookSecretFile = nil
        configuration.actionTable = .default
        #expect(configuration.problems == ["webhook.scope = rows needs webhook.url"])
    }
}

/// A site's webhook on loopback (failing its first `failures` deliveries) and its secret, and the
/// store a receiver test runs on: a directory of its own, with a PostgreSQL cluster and the token
/// key a shared store needs when the backend is PostgreSQL.
struct WebhookSite {
    let recorder: WebhookRecorder
    let server: LoopbackHTTPServer
    let directory: URL
    let cluster: PostgresCluster?
    let storeURL: StoreURL?
    var dataDirectory: String { directory.appendingPathComponent("data").path }

    init(_ backend: StorePortTests.Backend, failures: Int) async throws {
        recorder = WebhookRecorder(failures: failures)
        server = try LoopbackHTTPServer { [recorder] in recorder.handle($0) }
        directory = Scratch.root.appendingPathComponent("risc-webhook-\(UUID().uuidString)")
        try PrivateFiles.makeDirectory(directory.path)
        try PrivateFiles.writeAtomically(directory.appendingPathComponent("webhook-secret").path, [UInt8](repeating: 7, count: 32))
        guard backend == .postgresql else {
            (cluster, storeURL) = (nil, nil)
            return
        }
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        (self.cluster, storeURL) = (cluster, try StoreURL(cluster.url))
        try PrivateFiles.writeAtomically(directory.appendingPathComponent("token-key").path, [UInt8](repeating: 4, count: 32))
    }

    /// The webhook and, on PostgreSQL, the store's URL and token key.
    func configure(_ configuration: inout ReceiverConfiguration) {
        configuration.webhookURL = server.baseURL + "/revoke"
        configuration.webhookSecretFile = directory.appendingPathComponent("webhook-secret").path
        if let storeURL {
            configuration.store.url = storeURL
            configuration.tokenKeyFile = directory.appendingPathComponent("token-key").path
        }
    }

    func stop() async throws {
        server.stop()
        try await cluster?.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
