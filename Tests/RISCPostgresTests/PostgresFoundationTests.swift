import Foundation
import Logging
import RISCCore
import RISCPostgres
import RISCTestKit
import Testing

/// The PostgreSQL backend's foundation (issue 14 §2): the store URL, migrations that two
/// receivers may run at the same moment, and the refusal of a server that is not durable.
@Suite("PostgreSQL store: URL, schema, durability", .serialized)
struct PostgresFoundationTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// A throwaway cluster and two receivers' pools on it.
    static func twoReceivers() throws -> (PostgresCluster, PostgresDatabase, PostgresDatabase) {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try PostgresCluster()
        let url = try PostgresStoreURL(cluster.url)
        return (cluster, PostgresDatabase(url: url, password: nil, logger: logger), PostgresDatabase(url: url, password: nil, logger: logger))
    }

    @Test("store.url: user, host, port, database, socket directory and sslmode; never a password; bad ones named")
    func storeURL() throws {
        let socket = try PostgresStoreURL("postgres://risc@localhost:6543/events?host=/run/pg")
        #expect(socket.user == "risc" && socket.port == 6543 && socket.database == "events")
        #expect(socket.socketPath == "/run/pg/.s.PGSQL.6543" && socket.tls == .disable)
        let tcp = try PostgresStoreURL("postgresql://risc@db.internal/events?sslmode=verify-full")
        #expect(tcp.host == "db.internal" && tcp.port == 5432 && tcp.tls == .verifyFull && tcp.socketPath == nil)
        #expect(try PostgresStoreURL("postgres://risc@db/events").tls == .require)  // TLS unless told otherwise
        let cases: [(String, String)] = [
            ("postgres://risc:secret@db/events", "password"), ("mysql://risc@db/events", "postgres://"),
            ("postgres://db/events", "no user"), ("postgres://risc@db/", "no database"),
            ("postgres://risc@db/events?sslmode=prefer", "sslmode"), ("postgres://risc@db/events?host=relative", "absolute"),
            ("postgres://risc@db/events?application_name=x", "unknown parameter"),
        ]
        for (text, expected) in cases {
            let error = #expect(throws: PostgresStoreURL.Invalid.self) { try PostgresStoreURL(text) }
            #expect(error?.description.contains(expected) == true, "\(text): \(error?.description ?? "")")
            #expect(error?.description.contains("secret") != true)
        }
        #expect(!tcp.description.contains(":secret"))
    }

    @Test("two receivers migrating at the same moment: the schema is made once, both see the current version")
    func concurrentMigrations() async throws {
        let (cluster, first, second) = try Self.twoReceivers()
        async let a = first.migrate()
        async let b = second.migrate()
        let results = try await [a, b]
        #expect(results.map(\.to) == [PostgresSchema.version, PostgresSchema.version])
        #expect(results.filter { $0.from == 0 }.count == 1, "both migrated: \(results)")
        #expect(try cluster.psql("SELECT version FROM risc_schema") == "\(PostgresSchema.version)")
        #expect(try cluster.psql("SELECT count(*) FROM risc_schema") == "1")
        #expect(try cluster.psql("SELECT count(*) FROM information_schema.tables WHERE table_name IN ('sets', 'applied_actions', 'meta')") == "3")
        #expect(try await first.migrate().from == PostgresSchema.version)  // nothing left to do
        first.close()
        second.close()
        try cluster.stop()
    }

    @Test("the shared store's token key: recorded on first use, the same key accepted by every receiver, another or none refused")
    func tokenKey() async throws {
        let (cluster, first, second) = try Self.twoReceivers()
        try await first.migrate()
        let key = [UInt8](repeating: 7, count: 32), other = [UInt8](repeating: 9, count: 32)
        try await first.checkTokenKey(key, file: "/etc/risc/token-key")
        try await second.checkTokenKey(key, file: "/srv/copy/token-key")
        let wrong = await #expect(throws: PostgresDatabase.TokenKeyRefused.self) { try await second.checkTokenKey(other, file: "/tmp/k") }
        #expect(wrong?.description.contains("is not the key") == true)
        let none = await #expect(throws: PostgresDatabase.TokenKeyRefused.self) { try await second.checkTokenKey(nil, file: nil) }
        #expect(none?.description.contains("needs accounts.token_key_file") == true)
        #expect(try cluster.psql("SELECT value FROM meta WHERE name = 'token_key_check'") == TokenFingerprint.keyCheckValue(key))
        first.close()
        second.close()
        try cluster.stop()
    }

    @Test("a server without fsync or synchronous_commit is refused unless the configuration accepts it")
    func durability() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try PostgresCluster()
        let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: Self.logger)
        try await database.checkDurability()
        try cluster.psql("ALTER DATABASE risc SET synchronous_commit = off")
        let fresh = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: Self.logger)
        let error = await #expect(throws: PostgresDatabase.NotDurable.self) { try await fresh.checkDurability() }
        #expect(error?.description.contains("synchronous_commit is off") == true)
        try await fresh.checkDurability(acceptUnsafe: true)
        database.close()
        fresh.close()
        try cluster.stop()
    }
}

/// The PostgreSQL event store (issue 14 §2): group commit, duplicates across receivers.
@Suite("PostgreSQL event store", .serialized)
struct PostgresEventStoreTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()

    @Test("the same SETs to two receivers at the same instant: each stored once, 202 from both, deliveries counted; batches shared")
    func twoReceivers() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try PostgresCluster()
        let url = try PostgresStoreURL(cluster.url)
        let databases = (0..<2).map { _ in PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger) }
        try await databases[0].migrate()
        let stores = databases.map { PostgresEventStore(database: $0, commitDeadline: 60) }  // a loaded test machine
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        let jwks = try Self.keys.jwks
        var records: [SETRecord] = []
        for index in 0..<150 {
            records.append(try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("\(index)"), jti: "pg-\(index)", keys: jwks,
                receivedAt: Date().timeIntervalSince1970))
        }
        // Every SET goes to both receivers at once, and the first ten twice more to the first.
        let outcomes = try await withThrowingTaskGroup(of: (String, AppendOutcome).self) { group in
            for record in records {
                for store in stores { group.addTask { (record.tokenID, try await store.append(record)) } }
            }
            for record in records.prefix(10) { group.addTask { (record.tokenID, try await stores[0].append(record)) } }
            return try await group.reduce(into: [(String, AppendOutcome)]()) { $0.append($1) }
        }
        var accepted: [String: Int] = [:]
        var duplicateDeliveries: [String: [Int64]] = [:]
        for (jti, outcome) in outcomes {
            switch outcome {
            case .accepted: accepted[jti, default: 0] += 1
            case .duplicate(_, let deliveries): duplicateDeliveries[jti, default: []].append(deliveries)
            }
        }
        #expect(accepted.count == 150 && accepted.values.allSatisfy { $0 == 1 }, "each SET accepted exactly once")
        #expect(duplicateDeliveries["pg-0"]?.sorted() == [2, 3])
        #expect(duplicateDeliveries["pg-100"] == [2])
        #expect(try cluster.psql("SELECT count(*) FROM sets") == "150")
        #expect(try cluster.psql("SELECT sum(deliveries) FROM sets") == "\(150 * 2 + 10)")
        #expect(try cluster.psql("SELECT count(*) FROM sets WHERE state = 'pending' AND remote IS NULL AND content_type IS NULL") == "150")
        let commits = stores.map(\.writeCounts.commits).reduce(0, +)
        #expect(commits < 310, "no batching: \(commits) commits for 310 appends")
        for database in databases { database.close() }
        try cluster.stop()
    }

    @Test("retention and health on PostgreSQL; unwritable while the server is down, writable again when it is back")
    func retentionAndHealth() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try PostgresCluster()
        let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger)
        try await database.migrate()
        let store = PostgresEventStore(database: database)
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        let received = Date().timeIntervalSince1970
        for jti in ["r-done-1", "r-done-2", "r-dead", "r-pending"] {
            _ = try await store.append(try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: jti, keys: try Self.keys.jwks, receivedAt: received))
        }
        try cluster.psql("UPDATE sets SET state = 'done', processed_at = received_at WHERE jti LIKE 'r-done-%'")
        try cluster.psql("UPDATE sets SET state = 'dead' WHERE jti = 'r-dead'")
        #expect(try await store.queueDepth() == 1)
        #expect(try await store.deadLetters() == 1)
        #expect(try await store.oldestPendingReceivedAt() == received)
        #expect(try await store.lastReceivedAt() == received)
        #expect(await store.isWritable())
        let policy = RetentionPolicy()
        #expect(try await store.retain(policy, now: received + policy.done - 60, batch: 100) == RetentionPass())
        #expect(try await store.retain(policy, now: received + policy.done + 60, batch: 100) == RetentionPass(stripped: 2, forgotten: 0))
        #expect(try cluster.psql("SELECT count(*) FROM sets WHERE token = '' AND pruned_at IS NOT NULL") == "2")
        if case .accepted = try await store.append(try await factory.storedRecord(
            type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "r-done-1", keys: try Self.keys.jwks, receivedAt: received))
        {
            Issue.record("a stripped SET was stored again")
        }
        #expect(try await store.retain(policy, now: received + policy.duplicates + 60, batch: 100) == RetentionPass(stripped: 0, forgotten: 2))
        #expect(try cluster.psql("SELECT string_agg(jti, ',' ORDER BY jti) FROM sets") == "r-dead,r-pending")
        // The server goes away and comes back: no restart of ours needed.
        try cluster.stop(mode: "immediate")
        #expect(await !store.isWritable())
        try cluster.start()
        var back = false
        for _ in 0..<50 where !back {
            back = await store.isWritable()
            if !back { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(back, "the pool did not reconnect")
        database.close()
        try cluster.stop()
    }
}
