import Foundation
import RISCCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` into a temporary directory,
/// `pg_ctl start` with the Unix socket in that directory, a port of its own, `fsync` and
/// `synchronous_commit` on, and `stop()` when done. PostgreSQL refuses to run as root, so as root
/// the server commands run as the `postgres` user (`runuser -u postgres --`), which then owns the
/// directory; otherwise as the current user. Needs Debian's `postgresql` package
/// (`scripts/bootstrap --tests`).
///
/// Every command it runs (`initdb`, `pg_ctl`, `psql`) waits for its child on `BlockingPool.waits`'
/// threads, never on one of Swift concurrency's: those are as many as the cores (two here), and a
/// test waiting out a `pg_ctl stop` on each of them froze every receiver in the test process until
/// its clients' requests timed out.
public final class PostgresCluster: @unchecked Sendable {  // reason: started and stopped by the one test that owns it; the rest is immutable
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let directory: String
    /// Its port: picked free, and picked again when another process took it before the server
    /// bound it (a client's outbound connection can get any free port as its own).
    public private(set) var port: Int
    /// The superuser role (trust authentication, loopback and socket only).
    public let user = "risc"
    public let database = "risc"
    let bin: String
    private(set) public var running = false

    /// The store URL risc takes, over the Unix socket.
    public var url: String { "postgres://\(user)@localhost:\(port)/\(database)?host=\(directory)" }
    /// The same over TCP on 127.0.0.1.
    public var tcpURL: String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    /// The newest installed server's `bin` directory (`/usr/lib/postgresql/N/bin`).
    public static var binDirectory: String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }

    public static var isAvailable: Bool { binDirectory != nil }

    /// Creates and starts a cluster with a database `risc` owned by role `risc`.
    public static func make() async throws -> PostgresCluster {
        try await BlockingPool.waits.run { Result { try PostgresCluster() } }.get()
    }

    /// Runs `body` on a new cluster, then stops it (`fast`) whether `body` threw or not.
    public static func with<T>(_ body: (PostgresCluster) async throws -> T) async throws -> T {
        let cluster = try await make()
        let result: T
        do { result = try await body(cluster) } catch {
            try? await cluster.stop()
            throw error
        }
        try await cluster.stop()
        return result
    }

    private init() throws {
        guard let bin = Self.binDirectory else { throw Failure(description: "no PostgreSQL server installed: run scripts/bootstrap --tests") }
        self.bin = bin
        var template = Array((Scratch.root.path + "/risc-pg-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed") }
        directory = String(cString: made)
        // The server's socket goes in the directory: a Unix socket's path holds 107 bytes at most,
        // and past that `pg_ctl start` failed with only "Examine the log output".
        let socket = directory + "/.s.PGSQL.65535"
        guard socket.utf8.count <= 107 else {
            try? FileManager.default.removeItem(atPath: directory)
            throw Failure(
                description:
                    "a throwaway cluster's socket path (\(socket.utf8.count) bytes, as \(socket)) would pass the 107 a Unix socket allows: set TMPDIR to a shorter directory"
            )
        }
        port = try Self.quietPort()
        if geteuid() == 0 {
            try Self.run(["/bin/chown", "postgres:postgres", directory])
        }
        try runServer([bin + "/initdb", "-D", directory + "/data", "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C"])
        for attempt in 1...3 {
            do {
                try startNow()
                break
            } catch {
                let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
                guard attempt < 3, Self.portWasTaken(log) else { throw error }
                port = try Self.quietPort()
            }
        }
        _ = try psqlNow("CREATE DATABASE \(database)", database: "postgres")
    }

    /// A cluster still running when the last reference goes is stopped as a crash would, on a
    /// thread of its own: a deinit may run on any thread, one of Swift concurrency's too.
    deinit {
        let (running, directory, bin) = (self.running, self.directory, self.bin)
        OSThread.start(name: "test.pg.cleanup") {
            // Not stopped (a process being stopped by a signal starts no `pg_ctl`): left counted,
            // for `stopEveryCluster`.
            if running, (try? Self.runServer(bin: bin, [bin + "/pg_ctl", "-D", directory + "/data", "-m", "immediate", "-w", "stop"])) == nil {
                return
            }
            _ = Self.started.withLock { $0.remove(directory) }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// `pg_ctl start`, waiting until it accepts connections. A restart keeps the port (clients
    /// hold the URL): when something holds it for a moment, it is tried again for up to 30 s.
    public func start() async throws {
        for attempt in 1...30 {
            do {
                return try await BlockingPool.waits.run { Result { try self.startNow() } }.get()
            } catch {
                let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
                guard attempt < 30, Self.portWasTaken(log) else { throw error }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    private static func portWasTaken(_ log: String) -> Bool {
        log.contains("could not bind") || log.contains("already in use")
    }

    private func startNow() throws {
        let options = "-k \(directory) -p \(port) -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200"
        // Counted before the start: a signal while `pg_ctl` waits still stops the server it started.
        _ = Self.started.withLock { $0.insert(directory) }
        try runServer([bin + "/pg_ctl", "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o", options, "start"])
        running = true
    }

    /// The data directories of the clusters started and not stopped yet (for `stopEveryCluster`).
    private static let started = Mutex(Set<String>())

    /// Stops every cluster this process started and has not stopped, as a crash would (SIGQUIT to
    /// its postmaster: `pg_ctl stop -m immediate` without starting a child, for a process that
    /// starts none any more), waiting up to `within` seconds for each, then SIGKILL: for a
    /// benchmark ended by a signal, whose clusters would run on without it (`pg_ctl` leaves the
    /// server in a session of its own).
    public static func stopEveryCluster(within seconds: Double = 5) { stopClusters(in: started.withLock { $0 }, within: seconds) }

    /// Stops the clusters whose directories (each holding `data/postmaster.pid`) are given, as
    /// `stopEveryCluster` does: for a process that did not start them (the scratch warden).
    static func stopClusters(in directories: some Sequence<String>, within seconds: Double) {
        for directory in directories {
            guard let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
                let pid = text.split(separator: "\n").first.flatMap({ pid_t($0) }), pid > 0
            else { continue }
            // Running: not gone, nor a zombie that no one reaps (its parent is init, or nobody here).
            func running() -> Bool { kill(pid, 0) == 0 && ProcStat(path: "/proc/\(pid)/stat")?.state != "Z" }
            kill(pid, SIGQUIT)
            ChildProcess.pollWhile(upTo: seconds, running)
            if running() { kill(pid, SIGKILL) }
        }
    }

    /// `pg_ctl stop -m MODE`: `fast` (clean), or `immediate` (as a crash: recovery on the next start).
    public func stop(mode: String = "fast") async throws {
        try await BlockingPool.waits.run { Result { try self.stopBlocking(mode: mode) } }.get()
    }

    /// `stop(mode:)` for a synchronous teardown outside Swift concurrency (a command's `defer`):
    /// it blocks the calling thread until `pg_ctl` is done.
    public func stopBlocking(mode: String = "fast") throws {
        try runServer([bin + "/pg_ctl", "-D", directory + "/data", "-m", mode, "-w", "stop"])
        running = false
        _ = Self.started.withLock { $0.remove(directory) }
    }

    /// Stops (`SIGSTOP`) or resumes (`SIGCONT`) the server and every process of it: a server that
    /// keeps its connections open and stops answering, as one whose machine hangs. A test that
    /// freezes it resumes it before it stops the cluster.
    public func freeze(_ frozen: Bool) {
        let pidFile = (try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)) ?? ""
        guard let server = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }) else { return }
        let children = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init).filter {
            ProcStat(path: "/proc/\($0)/stat")?.field(4) == Substring(String(server))
        }
        for pid in [server] + children { kill(pid, frozen ? SIGSTOP : SIGCONT) }
    }

    /// Makes the cluster write as one in service does: a new cluster creates each 16 MiB WAL
    /// segment the first time it fills one, zero-filled and fsynced while every COMMIT waits (17 ms
    /// a segment here, one a second under a bench's load); afterwards checkpoints recycle them.
    /// Writes `megabytes` of WAL once and checkpoints, with `min_wal_size` keeping that much for
    /// reuse. Benchmarks call it before they measure.
    public func prepareWAL(megabytes: Int) async throws {
        try await psql("ALTER SYSTEM SET min_wal_size = '\(megabytes)MB'")
        try await psql("ALTER SYSTEM SET max_wal_size = '\(max(megabytes * 4, 1024))MB'")
        try await psql("SELECT pg_reload_conf()")
        // About 1.1 KB of WAL a row.
        try await psql("CREATE TABLE risc_wal_warmup AS SELECT repeat('x', 1000) AS x FROM generate_series(1, \(megabytes * 900))")
        try await psql("DROP TABLE risc_wal_warmup")
        try await psql("CHECKPOINT")
    }

    /// WAL segment files in the cluster's `pg_wal` (the current one and those kept for reuse).
    public func walSegments() async throws -> Int {
        Int(try await psql("SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'")) ?? 0
    }

    /// Runs `sql` with `psql` over the socket; returns its unaligned, tuples-only output.
    @discardableResult
    public func psql(_ sql: String, database: String? = nil) async throws -> String {
        try await BlockingPool.waits.run { Result { try self.psqlNow(sql, database: database) } }.get()
    }

    private func psqlNow(_ sql: String, database: String? = nil) throws -> String {
        try Self.run([
            bin + "/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", "\(port)", "-U", user, "-d", database ?? self.database,
            "-tAc", sql,
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func runServer(_ arguments: [String]) throws {
        try Self.runServer(bin: bin, arguments)
    }

    private static func runServer(bin: String, _ arguments: [String]) throws {
        _ = try run(geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments : arguments)
    }

    /// Runs a command to its end (`ChildProcess.runToEnd`: the child holds no descriptor of ours
    /// but its three streams); returns its standard output. The server that `pg_ctl start` leaves
    /// running holds none of them either: `-l` sends its streams to the log file.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: arguments[0])
        child.arguments = Array(arguments.dropFirst())
        let finished: ChildProcess.Finished
        do { finished = try child.runToEnd() } catch { throw Failure(description: "cannot start \(arguments[0]): \(error)") }
        let exited = finished.reason == .exit ? finished.status : 128 + finished.status
        guard exited == 0 else {
            throw Failure(description: "\(arguments.joined(separator: " ")) exited \(exited): \(String(decoding: finished.errorOutput, as: UTF8.self))")
        }
        return String(decoding: finished.output, as: UTF8.self)
    }

    /// Where `quietPort()` picks: below the kernel's ephemeral range, above the ports tests give
    /// the drills and benches they run (`DrillCommandTests.port`), which a cluster must not take
    /// between their pick and their use.
    public static let quietPorts = 20_000..<32_000

    /// A free port below the kernel's ephemeral range (32768 up): no outbound connection and no
    /// `freePort()` of another test takes it between this pick and its use (a cluster stopped and
    /// started again, a process told its port on the command line).
    public static func quietPort() throws -> Int {
        for _ in 0..<200 {
            if let (fd, port) = try? boundLoopbackSocket(port: Int.random(in: quietPorts)) {
                close(fd)
                return port
            }
        }
        return try freePort()
    }

    /// The first of `count` consecutive free ports for a command a test runs and tells where to
    /// listen (a drill, a bench, the README's walkthrough): below the ephemeral range, so the
    /// drill's thousands of client connections cannot take one as their source port while its
    /// server is down; below `quietPorts`, so no cluster another test starts takes one between
    /// this pick and the command's bind; below the drills' own defaults (18,643 and 18,743).
    public static func commandPorts(count: Int) throws -> Int {
        for _ in 0..<50 {
            let candidate = Int.random(in: 10_000..<(18_000 - count))
            let bound = (0..<count).map { try? boundLoopbackSocket(port: candidate + $0) }
            for socket in bound { socket.map { _ = close($0.fd) } }
            if bound.allSatisfy({ $0 != nil }) { return candidate }
        }
        throw Failure(description: "no \(count) consecutive free ports below 18,000")
    }

    public static func freePort() throws -> Int {
        let (fd, port) = try boundLoopbackSocket()
        close(fd)
        return port
    }

    /// A TCP socket bound to 127.0.0.1 on `port` (0: one the kernel picks; not yet listening), and
    /// that port. `reuseAddress`: SO_REUSEADDR first, as servers bind.
    public static func boundLoopbackSocket(port: Int = 0, reuseAddress: Bool = false) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if reuseAddress {
            var on: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            throw Failure(description: "no free port")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
