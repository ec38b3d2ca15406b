import Foundation
import Logging
import PostgresNIO
import RISCCore
import RISCPostgres
import RISCTestKit
import Synchronization
import Testing

typealias PostgresDatabase = RISCPostgres.PostgresDatabase

/// The PostgreSQL backend's foundation (issue 14 §2): the store URL, migrations that two
/// receivers may run at the same moment, and the refusal of a server that is not durable.
@Suite("PostgreSQL store: URL, schema, durability", .serialized)
struct PostgresFoundationTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// A throwaway cluster and two receivers' pools on it.
    static func twoReceivers() async throws -> (PostgresCluster, PostgresDatabase, PostgresDatabase) {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let url = try PostgresStoreURL(cluster.url)
        return (cluster, PostgresDatabase(url: url, password: nil, logger: logger), PostgresDatabase(url: url, password: nil, logger: logger))
    }

    @Test("a bench's cluster is prepared as one in service: 40 MB written after prepareWAL create no WAL segment (a new cluster makes them as it goes, each fsynced while COMMITs wait)")
    func walPreparedForBenches() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        for prepared in [false, true] {
            let cluster = try await PostgresCluster.make()
            if prepared { try await cluster.prepareWAL(megabytes: 96) }
            let before = try await cluster.walSegments()
            try await cluster.psql("CREATE TABLE written AS SELECT repeat('x', 1000) AS x FROM generate_series(1, 36000)")
            let created = try await cluster.walSegments() - before
            try await cluster.stop()
            // Unprepared: the segments are made as the WAL reaches them (what a bench's first
            // configuration paid, about one a second).
            #expect(prepared ? created == 0 : created >= 2, "prepared: \(prepared), \(created) segments created")
        }
    }

    @Test(
        "a bench's PostgreSQL is weighed with its receivers: with autogroup on, a backend (each calls setsid) is a scheduling group of its own, as heavy as the whole bench; in the bench's SchedulingScope it shares the bench's group"
    )
    func backendsScheduledWithTheBench() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let plan = SchedulingScope.currentPlan()
        var creates = false
        if case .create = plan { creates = true }
        for scoped in [false, true] {
            let scope = scoped ? SchedulingScope.enter() : nil
            let cluster = try await PostgresCluster.make()
            let walWriter = try await cluster.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
            let theirs = Int32(walWriter).flatMap { SchedulingScope.group(of: $0) }
            let ours = SchedulingScope.group(of: getpid())
            // A child still running in the scope at its end goes back with the process.
            let child = scoped ? ChildProcess() : nil
            if let child {
                child.executableURL = URL(fileURLWithPath: "/bin/sleep")
                child.arguments = ["30"]
                try child.run()
            }
            try await cluster.stop()
            scope?.leave()
            if let child {
                // (The cgroup itself may outlive `leave()` while other tests' processes fork in it:
                // the next `enter()` removes it.)
                #expect(SchedulingScope.group(of: child.processIdentifier) == SchedulingScope.group(of: getpid()))
                child.terminate()
                await child.exited(within: 10)
            }
            #expect(theirs != nil && ours != nil, "walwriter \(walWriter)")
            if !creates {
                // Autogroup off, or already in a CPU cgroup: weighed together without a scope.
                #expect(theirs == ours, "\(plan): \(theirs ?? "?") against \(ours ?? "?")")
            } else {
                // Outside the scope each backend is a session, and so a group, of its own.
                #expect(
                    (theirs == ours) == scoped,
                    "scoped: \(scoped), the walwriter in \(theirs ?? "?"), the bench in \(ours ?? "?"); \(scope?.summary ?? "")")
            }
        }
        // What the kernel's files say, decided.
        let v1 = "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:12 - cgroup cgroup rw,cpu\n37 25 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw"
        #expect(SchedulingScope.plan(autogroup: "1\n", cgroup: "2:cpuacct:/\n1:cpu:/\n0::/", mountinfo: v1) == .create(root: "/sys/fs/cgroup/cpu", unified: false))
        #expect(
            SchedulingScope.plan(autogroup: "1", cgroup: "1:cpu,cpuacct:/", mountinfo: v1.replacingOccurrences(of: "rw,cpu", with: "rw,cpu,cpuacct"))
                == .create(root: "/sys/fs/cgroup/cpu", unified: false))
        #expect(SchedulingScope.plan(autogroup: "1", cgroup: "0::/", mountinfo: "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw") == .create(root: "/sys/fs/cgroup", unified: true))
        for (autogroup, cgroup, said) in [
            ("0", "1:cpu:/", "autogroup off"), ("1", "1:cpu:/system.slice/risc.service", "in CPU cgroup /system.slice/risc.service"), ("1", "0::/user.slice", "in CPU cgroup /user.slice"),
        ] {
            guard case .none(let why) = SchedulingScope.plan(autogroup: autogroup, cgroup: cgroup, mountinfo: v1) else {
                Issue.record("\(cgroup): a cgroup would be made")
                continue
            }
            #expect(why.contains(said), "\(why)")
        }
        #expect(SchedulingScope.plan(autogroup: nil, cgroup: "1:cpu:/", mountinfo: v1) != .create(root: "/sys/fs/cgroup/cpu", unified: false))
        #expect(SchedulingScope.plan(autogroup: "1", cgroup: "1:cpu:/", mountinfo: "") != .create(root: "/sys/fs/cgroup/cpu", unified: false))
    }

    @Test("store.url: user, host, port, database, socket directory and sslmode; never a password; bad ones named")
    func storeURL() throws {
        let socket = try PostgresStoreURL("postgres://risc@localhost:6543/events?host=/run/pg")
        #expect(socket.user == "risc" && socket.port == 6543 && socket.database == "events")
        #expect(socket.socketPath == "/run/pg/.s.PGSQL.6543" && socket.tls == .disable)
        let tcp = try PostgresStoreURL("postgresql://risc@db.internal/events?sslmode=verify-full")
        #expect(tcp.host == "db.internal" && tcp.port == 5432 && tcp.tls == .verifyFull && tcp.socketPath == nil)
        #expect(try PostgresStoreURL("postgres://risc@db/events").tls == .verifyFull)  // issue 24 #4: a checked server unless told otherwise
        // An IPv6 address: connected to without its brackets, shown with them.
        let v6 = try PostgresStoreURL("postgres://risc@[2001:db8::5]:6432/events")
        #expect(v6.host == "2001:db8::5" && v6.port == 6432 && v6.description == "postgres://risc@[2001:db8::5]:6432/events?sslmode=verify-full")
        let cases: [(String, String)] = [
            ("postgres://risc:secret@db/events", "password"), ("mysql://risc@db/events", "postgres://"),
            ("postgres://db/events", "no user"), ("postgres://risc@db/", "no database"),
            ("postgres://risc@db/events?sslmode=prefer", "sslmode"), ("postgres://risc@db/events?host=relative", "absolute"),
            ("postgres://risc@db/events?application_name=x", "unknown parameter"),
            ("postgres://risc@db/events/extra", "one path segment after the host, got 'events/extra'"),
        ]
        for (text, expected) in cases {
            let error = #expect(throws: PostgresStoreURL.Invalid.self) { try PostgresStoreURL(text) }
            #expect(error?.description.contains(expected) == true, "\(text): \(error?.description ?? "")")
            #expect(error?.description.contains("secret") != true)
        }
        #expect(!tcp.description.contains(":secret"))
        // A user with an '@' (Azure's `name@server`) is read whole and shown escaped, so the URL shown reads back the same.
        let azure = try PostgresStoreURL("postgres://risc%40pg1@pg1.postgres.database.azure.com/events")
        #expect(azure.user == "risc@pg1" && azure.host == "pg1.postgres.database.azure.com")
        #expect(try PostgresStoreURL(azure.description).user == "risc@pg1", "\(azure.description)")
    }

    /// A server on loopback that speaks just enough PostgreSQL to ask for the password in clear
    /// (refusing TLS, as a fake server that cannot show a good certificate would); records
    /// whether a password message ever came.
    final class FakeCleartextServer: @unchecked Sendable {
        let fd: Int32
        let port: Int
        let state = Mutex<(connections: Int, passwords: [String])>((0, []))
        private let stopping = Atomic<Bool>(false)

        init() throws {
            (fd, port) = try PostgresCluster.boundLoopbackSocket()
            guard listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
            Thread.detachNewThread { [self] in serve() }
        }

        private func readExactly(_ client: Int32, _ count: Int) -> [UInt8]? {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: count)
            while bytes.count < count {
                let got = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, count - bytes.count, 0) }
                if got <= 0 { return nil }
                bytes += buffer[0..<got]
            }
            return bytes
        }

        private func int32(_ bytes: some Collection<UInt8>) -> Int { bytes.reduce(0) { $0 << 8 | Int($1) } }

        private func serve() {
            while !stopping.load(ordering: .relaxed) {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 50) > 0 else { continue }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                state.withLock { $0.connections += 1 }
                var wait = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                defer { close(client) }
                guard var head = readExactly(client, 8) else { continue }
                if int32(head[0..<4]) == 8 && int32(head[4..<8]) == 80_877_103 {  // SSLRequest: no TLS here
                    _ = [UInt8(ascii: "N")].withUnsafeBytes { send(client, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
                    guard let next = readExactly(client, 8) else { continue }
                    head = next
                }
                guard readExactly(client, int32(head[0..<4]) - 8) != nil else { continue }  // the rest of the startup message
                let cleartext: [UInt8] = [UInt8(ascii: "R"), 0, 0, 0, 8, 0, 0, 0, 3]
                _ = cleartext.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard let type = readExactly(client, 5), type[0] == UInt8(ascii: "p"),
                    let body = readExactly(client, int32(type[1..<5]) - 4)
                else { continue }
                state.withLock { $0.passwords.append(String(decoding: body.prefix { $0 != 0 }, as: UTF8.self)) }
            }
        }

        func stop() {
            stopping.store(true, ordering: .relaxed)
            close(fd)
        }
    }

    @Test("issue 24 #4: a password never goes to a server nobody checked: verify-full by default over TCP, and a password with sslmode=disable or require is refused")
    func passwordOnlyToACheckedServer() async throws {
        let server = try FakeCleartextServer()
        defer { server.stop() }
        let directory = Scratch.root.appendingPathComponent("risc-pg-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let passwordFile = directory.appendingPathComponent("password").path
        try PrivateFiles.writeAtomically(passwordFile, Array("hunter2-database-password\n".utf8))
        let base = "postgres://risc@127.0.0.1:\(server.port)/risc"
        func settings(_ url: String, password: Bool = true) throws -> SharedStore.Settings {
            var settings = SharedStore.Settings(url: try PostgresStoreURL(url), passwordFile: password ? passwordFile : nil)
            settings.needsTokenKey = false
            return settings
        }
        for mode in ["?sslmode=disable", "?sslmode=require"] {
            let refused = #expect(throws: StoreError.self) {
                _ = try SharedStore(settings: settings(base + mode), logger: PostgresFoundationTests.logger)
            }
            #expect(refused?.code == .refused)
            #expect(refused?.description.contains("verify-full") == true, "\(mode): \(refused?.description ?? "not refused")")
        }
        // The default mode checks the server, which this one cannot pass: no password leaves.
        let store = try SharedStore(settings: settings(base), logger: PostgresFoundationTests.logger)
        // (The pool retries an unreachable server for a minute; three seconds of attempts are enough.)
        let attempt = Task { try await store.prepare() }
        _ = await waitWhile { server.state.withLock({ $0.connections }) < 2 }
        attempt.cancel()
        store.close()
        let result = await attempt.result
        #expect(throws: (any Error).self) { try result.get() }
        #expect(server.state.withLock { $0.connections } >= 1, "the fake server saw no connection")
        #expect(server.state.withLock { $0.passwords }.isEmpty, "a password was sent to a server nobody checked")
    }

    /// Has the cluster ask for a SCRAM password (role `risc`'s, now `password`) on its socket and TCP from now on.
    static func requireSCRAM(_ cluster: PostgresCluster, password: String) async throws {
        try await cluster.psql("SET password_encryption = 'scram-sha-256'; ALTER ROLE risc PASSWORD '\(password)'")
        try Data("local all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n".utf8)
            .write(to: URL(fileURLWithPath: cluster.directory + "/data/pg_hba.conf"))
        try await cluster.psql("SELECT pg_reload_conf()")
    }

    @Test("issue 24: trace logs never carry PostgreSQL's SCRAM exchange (the client's proof)")
    func noSCRAMInTraceLogs() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            try await Self.requireSCRAM(cluster, password: "scram-test-password-0123")
            let entries = CapturedLog()
            let logger = entries.logger
            let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: "scram-test-password-0123", logger: logger)
            #expect(try await database.setting("fsync") == "on")
            database.close()
            let logged = entries.lines.withLock { $0 }
            let leaks = logged.filter { $0.lowercased().contains("sasl") || $0.contains("p=") || $0.contains("scram-test-password") }
            #expect(leaks.isEmpty, "\(leaks.count) log entries carry the SCRAM exchange: \(leaks.prefix(2))")
        }
    }

    @Test("store.password_file saved with a byte-order mark and CRLF (Windows' Notepad) authenticates, as every other secret file does")
    func passwordFileWithByteOrderMark() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            try await Self.requireSCRAM(cluster, password: "bom-test-password-0123")
            let passwordFile = cluster.directory + "/password"
            try PrivateFiles.writeAtomically(passwordFile, [0xEF, 0xBB, 0xBF] + Array("bom-test-password-0123\r\n".utf8))
            var settings = SharedStore.Settings(url: try PostgresStoreURL(cluster.url), passwordFile: passwordFile)
            settings.needsTokenKey = false
            let store = try SharedStore(settings: settings, logger: PostgresFoundationTests.logger)
            defer { store.close() }
            #expect(try await store.database.setting("fsync") == "on")
        }
    }

    @Test("two receivers migrating at the same moment: the schema is made once, both see the current version")
    func concurrentMigrations() async throws {
        let (cluster, first, second) = try await Self.twoReceivers()
        async let a = first.migrate()
        async let b = second.migrate()
        let results = try await [a, b]
        #expect(results.map(\.to) == [PostgresSchema.version, PostgresSchema.version])
        #expect(results.filter { $0.from == 0 }.count == 1, "both migrated: \(results)")
        #expect(try await cluster.psql("SELECT version FROM risc_schema") == "\(PostgresSchema.version)")
        #expect(try await cluster.psql("SELECT count(*) FROM risc_schema") == "1")
        #expect(try await cluster.psql("SELECT count(*) FROM information_schema.tables WHERE table_name IN ('sets', 'applied_actions', 'meta')") == "3")
        #expect(try await first.migrate().from == PostgresSchema.version)  // nothing left to do
        first.close()
        second.close()
        try await cluster.stop()
    }

    /// Found: an account that held an access-change time far ahead from before the ordering
    /// rule's bound (2403ce6) kept it. Schema 8 brings such times back to the bound.
    @Test("schema 8: an account's access-change time far ahead, written before the bound, is brought back to it; others are left")
    func farAheadAccessChangeClamped() async throws {
        let (cluster, database, other) = try await Self.twoReceivers()
        other.close()
        try await database.migrate()
        let now = Date().timeIntervalSince1970
        for (subject, changed) in [("ahead", "\(now + 365 * 86_400)"), ("recent", "\(now - 100)"), ("within", "\(now + 120)"), ("never", "NULL")] {
            _ = try await cluster.psql(
                "INSERT INTO accounts (issuer, subject, user_id, access_changed_at, created_at, updated_at) VALUES ('i', '\(subject)', 'u', \(changed), 1, 1)")
        }
        _ = try await cluster.psql("UPDATE risc_schema SET version = 7")
        #expect(try await database.migrate().from == 7)
        func changed(_ subject: String) async throws -> String {
            try await cluster.psql("SELECT coalesce(access_changed_at::text, 'null') FROM accounts WHERE subject = '\(subject)'")
        }
        let ahead = try #require(Double(try await changed("ahead")))
        #expect(ahead <= Date().timeIntervalSince1970 + OrderingRule.futureAllowance && ahead >= now + OrderingRule.futureAllowance - 1, "\(ahead - now)")
        #expect(Double(try await changed("recent")) == now - 100)
        #expect(Double(try await changed("within")) == now + 120)
        #expect(try await changed("never") == "null")
        database.close()
        try await cluster.stop()
    }

    @Test("the shared store's token key: recorded on first use, the same key accepted by every receiver, another or none refused")
    func tokenKey() async throws {
        let (cluster, first, second) = try await Self.twoReceivers()
        try await first.migrate()
        let key = [UInt8](repeating: 7, count: 32), other = [UInt8](repeating: 9, count: 32)
        try await first.checkTokenKey(key, file: "/etc/risc/token-key")
        try await second.checkTokenKey(key, file: "/srv/copy/token-key")
        let wrong = await #expect(throws: StoreError.self) { try await second.checkTokenKey(other, file: "/tmp/k") }
        #expect(wrong?.code == .refused)
        #expect(wrong?.description.contains("is not the key") == true)
        let none = await #expect(throws: StoreError.self) { try await second.checkTokenKey(nil, file: nil) }
        #expect(none?.code == .refused)
        #expect(none?.description.contains("needs accounts.token_key_file") == true)
        #expect(try await cluster.psql("SELECT value FROM meta WHERE name = 'token_key_check'") == TokenFingerprint.keyCheckValue(key))
        first.close()
        second.close()
        try await cluster.stop()
    }

    @Test("a server without fsync or synchronous_commit is refused unless the configuration accepts it")
    func durability() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger)
        try await database.checkDurability()
        try await cluster.psql("ALTER DATABASE risc SET synchronous_commit = off")
        let fresh = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger)
        let error = await #expect(throws: StoreError.self) { try await fresh.checkDurability() }
        #expect(error?.code == .refused)
        #expect(error?.description.contains("synchronous_commit is off") == true)
        try await fresh.checkDurability(acceptUnsafe: true)
        database.close()
        fresh.close()
        try await cluster.stop()
    }
}

/// The test cluster's own restarts, which long outages and drills rely on.
