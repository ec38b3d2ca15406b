import Foundation
import Logging
import PostgresNIO
import RISCCore
import RISCPostgres
import RISCTestKit
import Synchronization
import Testing

/// The PostgreSQL event store (issue 14 §2): group commit, duplicates across receivers.
@Suite("PostgreSQL event store", .serialized)
struct PostgresEventStoreTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()

    @Test("the same SETs to two receivers at the same instant: each stored once, 202 from both, deliveries counted; batches shared")
    func twoReceivers() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let url = try PostgresStoreURL(cluster.url)
        let databases = (0..<2).map { _ in PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger) }
        try await databases[0].migrate()
        let stores = databases.map { PostgresEventStore(database: $0, commitDeadline: 60) }  // a loaded test machine
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        let jwks = try Self.keys.jwks
        var records: [SETRecord] = []
        for index in 0..<150 {
            records.append(
                try await factory.storedRecord(
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
            case .journaled: Issue.record("the shared store has no journal")
            }
        }
        #expect(accepted.count == 150 && accepted.values.allSatisfy { $0 == 1 }, "each SET accepted exactly once")
        #expect(duplicateDeliveries["pg-0"]?.sorted() == [2, 3])
        #expect(duplicateDeliveries["pg-100"] == [2])
        #expect(try await cluster.psql("SELECT count(*) FROM sets") == "150")
        #expect(try await cluster.psql("SELECT sum(deliveries) FROM sets") == "\(150 * 2 + 10)")
        #expect(try await cluster.psql("SELECT count(*) FROM sets WHERE state = 'pending' AND remote IS NULL AND content_type IS NULL") == "150")
        let commits = stores.map(\.writeCounts.commits).reduce(0, +)
        #expect(commits < 310, "no batching: \(commits) commits for 310 appends")
        for database in databases { database.close() }
        try await cluster.stop()
    }

    @Test("a batch is answered once its COMMIT is confirmed, not after the next batch's statement: with the next one held up by another session, the first is answered")
    func confirmedAheadOfTheNextBatch() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let url = try PostgresStoreURL(cluster.url)
        let database = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
        let lockers = [PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger), PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)]
        try await database.migrate()
        let store = PostgresEventStore(database: database, maxBatch: 1, commitDeadline: 600)  // a loaded test machine
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        let first = try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "ahead-1", keys: try Self.keys.jwks)
        let second = try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("2"), jti: "ahead-2", keys: try Self.keys.jwks)
        // Two other sessions insert the same two SETs and hold their transactions: each of our
        // batches waits on the unique index until its holder lets go.
        let holds = try await zip(lockers, [first, second]).asyncMap { locker, record in
            try await Self.holdInsert(locker, issuer: record.issuer, jti: record.tokenID)
        }
        let answered = Answers()
        let firstAppend = Task {
            defer { answered.withLock { $0.append("ahead-1") } }
            return try await store.append(first)
        }
        let secondAppend = Task {
            defer { answered.withLock { $0.append("ahead-2") } }
            return try await store.append(second)
        }
        // The first batch waits on its holder, so the second SET waits for the next batch.
        #expect(try await waitWhile { try await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") != "1" })
        holds[0].release()
        _ = try await holds[0].holder.value
        // The first batch committed; the second is held up. The first is answered all the same
        // (before, its answer waited for the second batch's statement, held here for good).
        let ahead = await waitWhile(upTo: 20) { answered.withLock { $0 } != ["ahead-1"] }
        let order = answered.withLock { $0 }
        holds[1].release()
        _ = try await holds[1].holder.value
        #expect(ahead, "answered while the second batch was held up: \(order)")
        if case .accepted = try await firstAppend.value {} else { Issue.record("the first SET was not stored") }
        if case .accepted = try await secondAppend.value {} else { Issue.record("the second SET was not stored") }
        #expect(answered.withLock { $0 } == ["ahead-1", "ahead-2"])
        #expect(try await cluster.psql("SELECT count(*) FROM sets WHERE jti LIKE 'ahead-%'") == "2")
        database.close()
        for locker in lockers { locker.close() }
        try await cluster.stop()
    }

    /// The `jti`s of the appends answered so far, in order.
    final class Answers: Sendable {
        private let list = Mutex<[String]>([])
        func withLock<T>(_ body: (inout [String]) -> T) -> T { list.withLock { body(&$0) } }
    }

    /// Inserts a row of `sets` with (`issuer`, `jti`) in a transaction of `locker`'s and holds it
    /// (an insert of the same SET waits for it) until released; rolled back then.
    static func holdInsert(_ locker: PostgresDatabase, issuer: String, jti: String) async throws -> (release: @Sendable () -> Void, holder: Task<Void, any Error>) {
        let (released, release) = AsyncStream<Void>.makeStream()
        let (inserted, insertedSignal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            do {
                try await locker.client.withTransaction(logger: PostgresFoundationTests.logger) { connection in
                    try await connection.query(
                        """
                        INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, event_types, subjects, token)
                        VALUES (\(issuer), \(jti), \(issuer), 1, 1, 1, '[]', '[]', 'held')
                        """, logger: PostgresFoundationTests.logger)
                    insertedSignal.yield()
                    for await _ in released { break }
                    throw CancellationError()  // rolled back: the waiting insert goes ahead
                }
            } catch let error as PostgresTransactionError where error.closureError is CancellationError {}
        }
        for await _ in inserted { break }
        return ({ release.yield() }, holder)
    }

    @Test("a SET held up by a stuck transaction is answered at its deadline on the store's clock; the store then stores again")
    func commitDeadline() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let url = try PostgresStoreURL(cluster.url)
        let database = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
        let locker = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
        try await database.migrate()
        let clock = TestClock()
        let store = PostgresEventStore(database: database, commitDeadline: 60, clock: clock.function, watchInterval: 0.01)
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        func record(_ jti: String) async throws -> SETRecord {
            try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: jti, keys: try Self.keys.jwks)
        }
        // Another session holds the table until told to let go.
        let (release, holder) = await Self.lockSets(locker)
        let first = try await record("stuck-1")
        let answered = Mutex(false)
        let answer = Task {
            defer { answered.withLock { $0 = true } }
            return try await store.append(first)
        }
        // Real time passes, the store's clock not past the deadline: no answer.
        try await Task.sleep(for: .milliseconds(300))
        clock.advance(59.9)
        try await Task.sleep(for: .milliseconds(200))
        #expect(!answered.withLock { $0 }, "answered before its deadline")
        clock.advance(0.2)
        // Within seconds of real time: the deadline is read from the store's clock, not waited out.
        _ = await waitWhile { !answered.withLock({ $0 }) }
        #expect(answered.withLock { $0 }, "not answered 30 s after its deadline on the store's clock")
        if case .failure(let error as StoreError) = await answer.result {
            #expect(error.code == .timeout)
        } else {
            Issue.record("a SET behind a locked table was not answered with a timeout")
        }
        release()
        _ = try await holder.value
        // The same SET again (Google's retry) and a new one are stored: the stuck batch held up nothing after it.
        _ = try await store.append(first)
        let fresh = try await store.append(try await record("after-1"))
        if case .accepted = fresh {} else { Issue.record("a new SET was not stored: \(fresh)") }
        #expect(try await cluster.psql("SELECT count(*) FROM sets WHERE jti IN ('stuck-1', 'after-1')") == "2")
        database.close()
        locker.close()
        try await cluster.stop()
    }

    @Test("the queue's and the health checks' calls behind a locked table give up at their deadlines on the database's clock")
    func callDeadlinesOnTheClock() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let url = try PostgresStoreURL(cluster.url)
        let clock = TestClock()
        let database = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger, clock: clock.function)
        let locker = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
        try await database.migrate()
        let (release, holder) = await Self.lockSets(locker)
        let queue = PostgresWorkQueue(database: database, tokenKey: [])
        let store = PostgresEventStore(database: database)
        let claimEnded = Mutex<(any Error)??>(nil), depthEnded = Mutex<(any Error)??>(nil)
        let claim = Task {
            do {
                _ = try await queue.claim(owner: "w", limit: 10, lease: 60, now: 1_000, scope: .all)
                claimEnded.withLock { $0 = .some(nil) }
            } catch { claimEnded.withLock { $0 = error } }
        }
        let depth = Task {
            do {
                _ = try await store.queueDepth()
                depthEnded.withLock { $0 = .some(nil) }
            } catch { depthEnded.withLock { $0 = error } }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(claimEnded.withLock { $0 == nil } && depthEnded.withLock { $0 == nil }, "a call behind the lock answered")
        // The health read's 2 s pass on the clock: it gives up; the queue's 30 s have not.
        clock.advance(2.1)
        _ = await waitWhile(upTo: 10) { depthEnded.withLock { $0 == nil } }
        #expect((depthEnded.withLock { $0 } as? StoreError)?.code == .timeout, "the health read did not give up at 2 s on the clock")
        #expect(claimEnded.withLock { $0 == nil }, "the claim gave up before its 30 s")
        clock.advance(28)
        _ = await waitWhile(upTo: 10) { claimEnded.withLock { $0 == nil } }
        #expect((claimEnded.withLock { $0 } as? StoreError)?.code == .timeout, "the claim did not give up at 30 s on the clock")
        release()
        _ = try await holder.value
        _ = await (claim.value, depth.value)
        database.close()
        locker.close()
        try await cluster.stop()
    }

    @Test("the workers' LISTEN connection, cut, is made again a second of the database's clock later (it waited a second of real time)")
    func listenReconnectsOnTheClock() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let clock = TestClock()
        let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger, clock: clock.function)
        try await database.migrate()
        let queue = PostgresWorkQueue(database: database, tokenKey: [])
        let listener = Task { await queue.listen(wake: {}) }
        let listening = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND state = 'idle'"
        #expect(await waitWhile(upTo: 10) { (try? await cluster.psql(listening)) != "1" }, "no LISTEN session")
        _ = try await cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
        // While the clock stands still, it does not listen again, however long that is.
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(try await cluster.psql(listening) == "0", "listened again before its second on the clock")
        clock.advance(1)
        #expect(await waitWhile(upTo: 10) { (try? await cluster.psql(listening)) != "1" }, "did not listen again after its second on the clock")
        listener.cancel()
        await listener.value
        database.close()
        try await cluster.stop()
    }

    /// Holds `sets` locked from another session until `release` is called (`holder` then ends).
    static func lockSets(_ locker: PostgresDatabase) async -> (release: @Sendable () -> Void, holder: Task<Void, any Error>) {
        let (released, release) = AsyncStream<Void>.makeStream()
        let (locked, lockedSignal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await locker.client.withTransaction(logger: PostgresFoundationTests.logger) { connection in
                try await connection.query("LOCK TABLE sets IN ACCESS EXCLUSIVE MODE", logger: PostgresFoundationTests.logger)
                lockedSignal.yield()
                for await _ in released { break }
            }
        }
        for await _ in locked { break }
        return ({ release.yield() }, holder)
    }

    @Test("a CA file that cannot make a TLS context refuses the diagnosing connection; it never connects without TLS instead")
    func probeNeverDropsTLS() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let ca = directory + "/ca.pem"
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: ca))
        let port = try PostgresCluster.freePort()
        let database = PostgresDatabase(
            url: try PostgresStoreURL("postgres://risc@127.0.0.1:\(port)/risc?sslmode=verify-full"), password: "secret-password",
            caFile: ca, logger: PostgresFoundationTests.logger)
        defer { database.close() }
        do {
            try await database.probe()
            Issue.record("the probe connected")
        } catch let error as StoreError {
            #expect(error.code == .refused && error.description.contains("TLS cannot be set up"), "\(error)")
        }
    }

    @Test("issue 26 §3: a store that cannot be used names its cause; what waiting will not fix (a missing database, a wrong password) is refused")
    func causes() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let directory = Scratch.root.appendingPathComponent("risc-causes-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func prepare(_ url: String, password: String? = nil) async throws -> StoreError? {
            var settings = SharedStore.Settings(url: try PostgresStoreURL(url))
            settings.needsTokenKey = false
            if let password {
                settings.passwordFile = directory + "/password"
                try Data(password.utf8).write(to: URL(fileURLWithPath: directory + "/password"))
            }
            let store = try SharedStore(settings: settings, logger: PostgresFoundationTests.logger)
            defer { store.close() }
            do {
                try await store.prepare()
                return nil
            } catch {
                return error as? StoreError
            }
        }
        let missing = try await prepare(cluster.url.replacingOccurrences(of: "/\(cluster.database)?", with: "/nosuchdb?"))
        #expect(missing?.code == .refused, "\(String(describing: missing))")
        #expect(missing?.description.contains("\"nosuchdb\" does not exist") == true, "\(String(describing: missing))")
        // A role that must give a password, and gives the wrong one.
        try await cluster.psql("CREATE ROLE keeper LOGIN PASSWORD 'right'")
        let hba = cluster.directory + "/data/pg_hba.conf"
        let rules = try String(contentsOfFile: hba, encoding: .utf8)
        try ("local all keeper scram-sha-256\n" + rules).write(toFile: hba, atomically: false, encoding: .utf8)
        try await cluster.psql("SELECT pg_reload_conf()")
        let wrong = try await prepare(cluster.url.replacingOccurrences(of: "\(cluster.user)@", with: "keeper@"), password: "wrong")
        #expect(wrong?.code == .refused, "\(String(describing: wrong))")
        #expect(wrong?.description.contains("authentication failed for user keeper") == true, "\(String(describing: wrong))")
        // Nobody listening: temporary, and said as the system says it.
        let port = try PostgresCluster.freePort()
        let refused = try await prepare("postgres://risc@127.0.0.1:\(port)/risc?sslmode=disable")
        #expect(refused?.code == .unavailable, "\(String(describing: refused))")
        #expect(refused?.description.lowercased().contains("connection refused") == true, "\(String(describing: refused))")
        try await cluster.stop()
        let gone = try await prepare(cluster.url)
        #expect(gone?.code == .unavailable, "\(String(describing: gone))")
        #expect(gone?.description.contains("No such file") == true, "\(String(describing: gone))")
    }

    @Test("issue 26 §7: a PostgreSQL store a newer risc migrated is refused at start, naming both versions")
    func newerSchemaRefused() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            var settings = SharedStore.Settings(url: try PostgresStoreURL(cluster.url))
            settings.needsTokenKey = false
            let store = try SharedStore(settings: settings, logger: PostgresFoundationTests.logger)
            defer { store.close() }
            try await store.prepare()
            #expect(try await store.database.schemaVersion() == PostgresSchema.version)
            try await cluster.psql("UPDATE risc_schema SET version = \(PostgresSchema.version + 1)")
            do {
                try await store.prepare()
                Issue.record("a newer schema was accepted")
            } catch let error as StoreError {
                #expect(error.code == .refused)
                #expect(
                    error.description.contains("schema is version \(PostgresSchema.version + 1), and this risc knows versions up to \(PostgresSchema.version)"),
                    "\(error)")
            }
        }
    }

    /// A migrated store holding what `sets` inserts, with fresh statistics, opened so that every
    /// statement's plan goes to the server's log (`auto_explain`; with `analyze`, the rows each
    /// node produced too).
    static func plansLogged(_ cluster: PostgresCluster, sets: String, analyze: Bool = false) async throws -> PostgresDatabase {
        let url = try PostgresStoreURL(cluster.url)
        let setup = PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
        try await setup.migrate()
        setup.close()
        try await cluster.psql(sets)
        try await cluster.psql("VACUUM ANALYZE sets")
        // Every statement of a new session.
        try await cluster.psql("ALTER DATABASE \(cluster.database) SET session_preload_libraries = 'auto_explain'")
        try await cluster.psql("ALTER DATABASE \(cluster.database) SET auto_explain.log_min_duration = 0")
        if analyze { try await cluster.psql("ALTER DATABASE \(cluster.database) SET auto_explain.log_analyze = on") }
        return PostgresDatabase(url: url, password: nil, logger: PostgresFoundationTests.logger)
    }

    @Test("what every receiver asks each second (health) and polls (workers, lease recovery, retention) never scans the SETs table (issue 25)")
    func periodicStatementsUseIndexes() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            // A store of a day's SETs, all done.
            let database = try await Self.plansLogged(
                cluster,
                sets: """
                    INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, event_types, subjects, token, state, processed_at)
                    SELECT 'https://accounts.google.com', 'j' || g, 'https://accounts.google.com', g, g, g, '[]', '[]', md5(g::text), 'done', g
                    FROM generate_series(1, 20000) AS g
                    """)
            let store = PostgresEventStore(database: database)
            // What `StoreSampler` asks.
            #expect(await store.writability(within: 5).writable)
            #expect(try await store.queueDepth() == 0)
            #expect(try await store.deadLetters() == 0)
            #expect(try await store.retrying() == 0)
            #expect(try await store.oldestPendingReceivedAt() == nil)
            #expect(try await store.lastReceivedAt() == 20000)
            // What the workers poll for, and the periodic lease recovery and retention pass.
            let queue = PostgresWorkQueue(database: database, tokenKey: [UInt8](repeating: 7, count: 32))
            for scope in [ClaimScope.all, .sets, .notices] {
                #expect(try await queue.claim(owner: "test", limit: 16, lease: 30, now: 30000, scope: scope).isEmpty)
            }
            #expect(try await queue.rescueExpiredLeases(now: 30000).isEmpty)
            #expect(try await store.retain(RetentionPolicy(), now: 30000, batch: 500) == RetentionPass())
            database.close()
            let log = try String(contentsOfFile: cluster.directory + "/server.log", encoding: .utf8)
            let plans = log.components(separatedBy: "Query Text:").dropFirst()
            #expect(plans.filter { $0.contains("FROM sets") }.count >= 10, "auto_explain logged too few plans")
            for plan in plans where plan.contains("Seq Scan on sets") {
                Issue.record("a periodic statement scans the table: \(plan.prefix(800))")
            }
        }
    }

    @Test("a long queue: the health sampler finds its oldest SET without reading every pending one")
    func oldestPendingWithoutReadingTheQueue() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            // A webhook away for a while: 20,000 SETs wait, due in arrival order.
            let database = try await Self.plansLogged(
                cluster,
                sets: """
                    INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, event_types, subjects, token, state, attempts, next_attempt_at)
                    SELECT 'https://accounts.google.com', 'j' || g, 'https://accounts.google.com', g, 1000 + g, 1000 + g, '[]', '[]', md5(g::text),
                        'pending', g % 3, 5000 + g
                    FROM generate_series(1, 20000) AS g
                    """, analyze: true)
            let store = PostgresEventStore(database: database)
            #expect(try await store.oldestPendingReceivedAt() == 1001)
            database.close()
            let log = try String(contentsOfFile: cluster.directory + "/server.log", encoding: .utf8)
            let plans = log.components(separatedBy: "Query Text:").dropFirst().filter { $0.contains("min(received_at)") }
            try #require(!plans.isEmpty, "auto_explain logged no plan for the oldest pending SET")
            // Every node of the plan, with the rows it produced: a few, not the queue.
            let rows = plans[0].matches(of: /actual time=[0-9.]+\.\.[0-9.]+ rows=([0-9]+) loops=([0-9]+)/).map { Int($0.1)! * Int($0.2)! }
            #expect(!rows.isEmpty && rows.allSatisfy { $0 < 100 }, "the oldest pending SET read the queue: \(plans[0].prefix(1_200))")
        }
    }

    @Test("retention and health on PostgreSQL; unwritable while the server is down, writable again when it is back")
    func retentionAndHealth() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger)
        try await database.migrate()
        let store = PostgresEventStore(database: database)
        let factory = SETFactory(signer: Self.keys.entry(for: .eddsa)!.signer)
        let received = Date().timeIntervalSince1970
        for jti in ["r-done-1", "r-done-2", "r-dead", "r-pending"] {
            _ = try await store.append(
                try await factory.storedRecord(
                    type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: jti, keys: try Self.keys.jwks, receivedAt: received))
        }
        try await cluster.psql("UPDATE sets SET state = 'done', processed_at = received_at WHERE jti LIKE 'r-done-%'")
        try await cluster.psql("UPDATE sets SET state = 'dead' WHERE jti = 'r-dead'")
        #expect(try await store.queueDepth() == 1)
        #expect(try await store.deadLetters() == 1)
        #expect(try await store.oldestPendingReceivedAt() == received)
        #expect(try await store.lastReceivedAt() == received)
        #expect(await store.isWritable())
        let policy = RetentionPolicy()
        #expect(try await store.retain(policy, now: received + policy.done - 60, batch: 100) == RetentionPass())
        #expect(try await store.retain(policy, now: received + policy.done + 60, batch: 100) == RetentionPass(stripped: 2, forgotten: 0))
        #expect(try await cluster.psql("SELECT count(*) FROM sets WHERE token = '' AND pruned_at IS NOT NULL") == "2")
        if case .accepted = try await store.append(
            try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "r-done-1", keys: try Self.keys.jwks, receivedAt: received))
        {
            Issue.record("a stripped SET was stored again")
        }
        #expect(try await store.retain(policy, now: received + policy.duplicates + 60, batch: 100) == RetentionPass(stripped: 0, forgotten: 2))
        #expect(try await cluster.psql("SELECT string_agg(jti, ',' ORDER BY jti) FROM sets") == "r-dead,r-pending")
        // The server goes away and comes back: no restart of ours needed.
        try await cluster.stop(mode: "immediate")
        #expect(await !store.isWritable())
        try await cluster.start()
        var back = false
        for _ in 0..<50 where !back {
            back = await store.isWritable()
            if !back { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(back, "the pool did not reconnect")
        database.close()
        try await cluster.stop()
    }
}
