import Foundation
import Logging
import RISCCore
import RISCPostgres
import RISCTestKit
import Synchronization
import Testing

/// The shared store's queue (issue 14 §2): leases, finish guarded by the lease, rescue, exactly
/// once across workers; the account repository and the queue administration on PostgreSQL.
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
            cluster = try PostgresCluster()
            let keyFile = cluster.directory + "/token-key"
            _ = FileManager.default.createFile(atPath: keyFile, contents: Data(PostgresQueueTests.tokenKey))
            var settings = SharedStore.Settings(url: cluster.url, tokenKeyFile: keyFile)
            settings.acceptUnsafeDurability = false
            // Not under test here: the 5-s production answer deadline, which a loaded CI machine
            // (clusters of other suites fsync-ing beside this one) exceeded for a batch of 15.
            settings.timeout = 30
            stores = try (0..<receivers).map { _ in try SharedStore(settings: settings, logger: PostgresQueueTests.logger) }
            for store in stores { try await store.prepare() }
        }

        func append(_ type: EventType, subject: JSONValue?, jti: String, iat: Double = 2_000, extra: JSONObject = [:]) async throws {
            _ = try await stores[0].events.append(try await PostgresQueueTests.factory.storedRecord(
                type: type, subject: subject, extra: extra, jti: jti, iat: iat, keys: try PostgresQueueTests.keys.jwks,
                receivedAt: Date().timeIntervalSince1970))
        }

        func close() throws {
            for store in stores { store.close() }
            try cluster.stop()
        }
    }

    static func user(_ sub: String) -> JSONValue { factory.accountSubject(sub) }

    @Test("two workers on two receivers drain one queue: every (SET, event, action) applied exactly once, the account store changed once")
    func exactlyOnceAcrossWorkers() async throws {
        let f = try await Fixture()
        _ = try await f.stores[0].accounts.link(
            AccountLink(subject: "alice", userID: "u-alice", sessions: ["s1", "s2"], refreshTokens: ["1//0galice"]), now: 1_000)
        for index in 0..<40 {
            _ = try await f.stores[1].accounts.link(AccountLink(subject: "user-\(index)", userID: "u\(index)", sessions: ["a", "b"]), now: 1_000)
            try await f.append(.sessionsRevoked, subject: Self.user("user-\(index)"), jti: "s-\(index)")
        }
        try await f.append(.tokensRevoked, subject: Self.user("alice"), jti: "t-alice")
        try await f.append(.accountDisabled, subject: Self.user("alice"), jti: "d-alice", extra: ["reason": "hijacking"])
        let log = MemoryLog()
        let workers = f.stores.enumerated().map { index, store in
            var settings = QueueWorker.Settings(owner: "receiver-\(index)")
            settings.batch = 3
            return QueueWorker(queue: store.queue, settings: settings, log: log, logger: Self.logger)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in workers {
                group.addTask { while try await worker.processDue() > 0 {} }
            }
            try await group.waitForAll()
        }
        #expect(try f.cluster.psql("SELECT count(*) FROM sets WHERE state = 'done' AND lease_owner IS NULL") == "42")
        // 40 × end_sessions, tokens-revoked: 2, hijacking: 3.
        #expect(try f.cluster.psql("SELECT count(*) FROM applied_actions") == "45")
        #expect(try f.cluster.psql("SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL") == "82")
        let alice = try #require(try await f.stores[1].accounts.accounts(subject: "alice").first)
        #expect(alice.openSessions == 0 && alice.revokedTokens == 1 && !alice.googleSignInEnabled && alice.emailRecoveryEnabled)
        #expect(log.outcomes("applied").filter { $0 == "applied" }.count == 42)
        let owners = Set(log.lines.withLock { $0.compactMap { $0["worker"]?.stringValue } })
        #expect(owners.count == 2, "one worker took everything: \(owners)")
        try f.close()
    }

    @Test("a worker that dies holding a lease: its SET is rescued after the lease and finished by another; the dead one's late finish changes nothing")
    func leaseRescue() async throws {
        let f = try await Fixture()
        _ = try await f.stores[0].accounts.link(AccountLink(subject: "carol", userID: "u-carol", sessions: ["c1"]), now: 1_000)
        try await f.append(.sessionsRevoked, subject: Self.user("carol"), jti: "leased")
        let now = Date().timeIntervalSince1970
        let held = try await f.stores[0].queue.claim(owner: "dead-receiver", limit: 10, lease: 30, now: now)
        #expect(held.map(\.jti) == ["leased"])
        #expect(try await f.stores[1].queue.claim(owner: "other", limit: 10, lease: 30, now: now + 1).isEmpty, "a live lease was taken")
        #expect(try await f.stores[1].queue.rescueExpiredLeases(now: now + 10).isEmpty)
        #expect(try await f.stores[1].queue.rescueExpiredLeases(now: now + 31) == ["leased"])
        let log = MemoryLog()
        let worker = QueueWorker(queue: f.stores[1].queue, settings: .init(owner: "survivor"), log: log, logger: Self.logger)
        #expect(try await worker.processDue(now: now + 32) == 1)
        let claims = try SecurityEventToken(payload: CompactJWS(held[0].token).payload)
        let late = try await f.stores[0].queue.finish(
            held[0], plan: ActionPlan.plan(for: claims, table: .default), claims: claims, applyToAccounts: true, now: now + 33)
        #expect(late == nil, "the dead receiver's late finish went through")
        #expect(try await !f.stores[0].queue.fail(held[0], error: "late", retryAt: nil, now: now + 33))
        #expect(try f.cluster.psql("SELECT count(*) FROM applied_actions") == "1")
        #expect(try f.cluster.psql("SELECT state || ' ' || attempts FROM sets") == "done 1")
        #expect(try f.cluster.psql("SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL") == "1")
        try f.close()
    }

    @Test("failures are retried with backoff, then dead-lettered; queue administration on PostgreSQL lists, shows, retries and purges")
    func failuresAndAdministration() async throws {
        let f = try await Fixture(receivers: 1)
        try await f.append(.sessionsRevoked, subject: Self.user("nobody"), jti: "broken")
        try f.cluster.psql("UPDATE sets SET token = 'not a token' WHERE jti = 'broken'")
        var retry = RetryPolicy()
        retry.maximumAttempts = 2
        retry.jitter = 0
        let log = MemoryLog()
        let worker = QueueWorker(queue: f.stores[0].queue, settings: .init(owner: "w"), retry: retry, log: log, logger: Self.logger)
        let now = Date().timeIntervalSince1970
        #expect(try await worker.processDue(now: now) == 1)
        let admin = f.stores[0].admin
        var counts = try await admin.counts(now: now)
        #expect(counts.scheduledRetry == 1 && counts.dead == 0)
        #expect(try await worker.processDue(now: now) == 0, "retried before its backoff")
        #expect(try await worker.processDue(now: now + 5) == 1)
        counts = try await admin.counts(now: now)
        #expect(counts.dead == 1 && counts.pending == 0)
        #expect(log.outcomes("applied") == ["failed", "dead_lettered"])
        let shown = try #require(try await admin.show(jti: "broken"))
        #expect(shown.state == .dead && shown.attempts == 2 && shown.lastError != nil)
        #expect(try await admin.list(state: .dead, limit: 10).map(\.jti) == ["broken"])
        #expect(try await admin.retry(jti: nil) == 1)
        #expect(try await admin.counts(now: now).pending == 1)
        try f.cluster.psql("UPDATE sets SET state = 'dead'")
        #expect(try await admin.purgeDead(olderThan: 86_400, now: now) == 0)
        #expect(try await admin.purgeDead(olderThan: 0, now: now + 1) == 1)
        #expect(try await admin.counts(now: now) == QueueCounts())
        try f.close()
    }

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
        try f.close()
    }
}
