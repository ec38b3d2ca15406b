import Foundation
import Logging
import RISCCore
import RISCPostgres
import RISCSQL
import RISCTestKit
import Synchronization
import Testing

/// The shared store's queue beyond the port suite (`StorePortTests` holds the queue's contract on
/// both backends): requeue and rows read back on PostgreSQL.
@Suite("PostgreSQL queue and accounts", .serialized)
struct PostgresQueueTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let factory = SETFactory(signer: keys.entry(for: .eddsa)!.signer)
    static let tokenKey = [UInt8](repeating: 3, count: 32)
    static let logger = PostgresFoundationTests.logger

    typealias MemoryLog = MemoryEventLog

    struct Fixture {
        let cluster: PostgresCluster
        let stores: [SharedStore]

        init(receivers: Int = 2) async throws {
            try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
            cluster = try await PostgresCluster.make()
            let keyFile = cluster.directory + "/token-key"
            _ = FileManager.default.createFile(atPath: keyFile, contents: Data(PostgresQueueTests.tokenKey))
            var settings = SharedStore.Settings(url: try PostgresStoreURL(cluster.url), tokenKeyFile: keyFile)
            settings.acceptUnsafeDurability = false
            // Not under test here: the 5-s production answer deadline, which a loaded CI machine
            // (clusters of other suites fsync-ing beside this one) exceeded for a batch of 15.
            settings.timeout = 30
            stores = try (0..<receivers).map { _ in try SharedStore(settings: settings, logger: PostgresQueueTests.logger) }
            for store in stores { try await store.prepare() }
        }

        func append(_ type: EventType, subject: JSONValue?, jti: String, iat: Double = 2_000, extra: JSONObject = [:]) async throws {
            _ = try await stores[0].events.append(
                try await PostgresQueueTests.factory.storedRecord(
                    type: type, subject: subject, extra: extra, jti: jti, iat: iat, keys: try PostgresQueueTests.keys.jwks,
                    receivedAt: Date().timeIntervalSince1970))
        }

        func close() async throws {
            for store in stores { store.close() }
            try await cluster.stop()
        }
    }

    static func user(_ sub: String) -> JSONValue { factory.accountSubject(sub) }

    @Test("replay --local on PostgreSQL: chosen SETs requeued, applied again, rows read back with their actions")
    func requeueAndRows() async throws {
        let f = try await Fixture(receivers: 1)
        _ = try await f.stores[0].accounts.link(AccountLink(subject: "dave", userID: "u-dave", sessions: ["d1"]), now: 1_000)
        try await f.append(.sessionsRevoked, subject: Self.user("dave"), jti: "again")
        let worker = QueueWorker(queue: f.stores[0].queue, settings: .init(owner: "w"), log: MemoryLog(), logger: Self.logger)
        try await worker.processDue()
        let admin = f.stores[0].admin
        let ids = try await admin.ids(StoredSETSelection(jti: "again"))
        #expect(ids.count == 1)
        #expect(try await admin.tokens(StoredSETSelection(jti: "again")).map(\.jti) == ["again"])
        _ = try await f.stores[0].accounts.add(
            to: "dave", issuer: nil, session: "d2", viaGoogle: true, token: nil, tokenKind: .googleRefresh, now: 1_500)
        #expect(try await admin.requeue(ids: ids) == ids)
        try await worker.processDue()
        let rows = try await admin.rows(ids: ids)
        #expect(rows.first?.state == .done && rows.first?.actions?.map(\.result) == ["ended 1 session"])
        #expect(try await f.stores[0].accounts.accounts(subject: "dave").first?.openSessions == 0)
        try await f.close()
    }

    /// Found: an action that failed on the server was logged as PostgresNIO's "Generic
    /// description to prevent accidental leakage of sensitive data": nothing an operator tailing
    /// the log could act on.
    @Test("an action the server refuses is logged with the server's message and SQLSTATE, not the driver's generic text")
    func serverErrorsLoggedInItsWords() async throws {
        let f = try await Fixture(receivers: 1)
        _ = try await f.stores[0].accounts.link(AccountLink(subject: "erin", userID: "u-erin", sessions: ["e1"]), now: 1_000)
        try await f.cluster.psql("ALTER TABLE sessions RENAME COLUMN ended_at TO ended_at_renamed")
        try await f.append(.sessionsRevoked, subject: Self.user("erin"), jti: "refused-by-server")
        let log = MemoryLog()
        let worker = QueueWorker(queue: f.stores[0].queue, settings: .init(owner: "w"), log: log, logger: Self.logger)
        try await worker.processDue()
        let error = log.lines.withLock { $0 }.compactMap { $0["error"]?.stringValue }.first ?? ""
        #expect(error.contains(#"PostgreSQL said: column "ended_at" does not exist (SQLSTATE 42703)"#), "\(error)")
        #expect(!error.contains("Generic description"), "\(error)")
        try await f.close()
    }
}
