import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
public import PostgresNIO
public import RISCCore
import Synchronization

/// A connection pool to the shared PostgreSQL store, with its schema migrated and its
/// durability checked.
///
/// Table and column names follow the embedded store's wherever the meaning is the same (`sets`
/// with `issuer`, `jti`, `state` `pending|done|dead`, `deliveries`…; `applied_actions`, `meta`),
/// so operators' queries carry over. Migrations are versioned in the table `risc_schema` and run
/// under a transaction-scoped advisory lock: two receivers starting at the same moment migrate
/// once, the second finding the work done.
public final class PostgresDatabase: Sendable {
    public let url: PostgresStoreURL
    /// The pool: replaced by `renewIfQuiet` after an outage, so always read it here.
    public var client: PostgresClient { pool.withLock { $0.client } }
    private let pool: Mutex<(client: PostgresClient, runner: Task<Void, Never>)>
    private let configuration: PostgresClient.Configuration
    let logger: Logger
    /// Now, in seconds (monotonic by default; tests move it): the deadlines of the queue's and the
    /// health checks' calls, and how long the server has been quiet.
    public let clock: @Sendable () -> Double
    /// When a query last succeeded (on `clock`), for `renewIfQuiet`.
    private let lastSuccess: Mutex<Double>

    /// How to open one connection, apart from the pool (`probe`); the refusal when the TLS
    /// settings cannot be made into a context (then no connection is tried, never one without TLS).
    private let connection: Result<PostgresConnection.Configuration, StoreError>

    /// Opens a pool (it connects lazily). `password`: the contents of `store.password_file`.
    public init(
        url: PostgresStoreURL, password: String?, caFile: String? = nil, logger: Logger,
        clock: @escaping @Sendable () -> Double = systemUptime
    ) {
        self.url = url
        self.clock = clock
        lastSuccess = Mutex(clock())
        // PostgresNIO's trace lines carry the wire messages, the SASL exchange among them (the
        // client's proof): never below debug for it, whatever risc's own level.
        var logger = logger
        if logger.logLevel < .debug { logger.logLevel = .debug }
        self.logger = logger
        var configuration: PostgresClient.Configuration
        var connection: Result<PostgresConnection.Configuration, StoreError>
        if let socket = url.socketPath {
            configuration = .init(unixSocketPath: socket, username: url.user, password: password, database: url.database)
            connection = .success(.init(unixSocketPath: socket, username: url.user, password: password, database: url.database))
        } else {
            let tls: PostgresClient.Configuration.TLS
            var single: Result<PostgresConnection.Configuration.TLS, StoreError> = .success(.disable)
            switch url.tls {
            case .disable:
                tls = .disable
            case .require, .verifyFull:
                // TLS 1.2 or newer; `require` encrypts without checking the certificate (libpq's
                // meaning), `verify-full` checks it and the host name.
                var settings = TLSConfiguration.makeClientConfiguration()
                settings.minimumTLSVersion = .tlsv12
                settings.cipherSuites = TLSPolicy.tls12CipherSuites
                if url.tls == .require { settings.certificateVerification = .none }
                if let caFile { settings.trustRoots = .file(caFile) }
                tls = .require(settings)
                single = Result { .require(try NIOSSLContext(configuration: settings)) }
                    .mapError { StoreError(.refused, "PostgreSQL at \(url): TLS cannot be set up: \($0) (store.ca_file)") }
            }
            configuration = .init(host: url.host, port: url.port, username: url.user, password: password, database: url.database, tls: tls)
            connection = single.map { .init(host: url.host, port: url.port, username: url.user, password: password, database: url.database, tls: $0) }
        }
        configuration.options.connectTimeout = .seconds(5)
        self.connection = connection.map { connection in
            var connection = connection
            connection.options.connectTimeout = .seconds(5)
            return connection
        }
        self.configuration = configuration
        pool = Mutex(Self.startPool(configuration, logger: logger))
    }

    private static func startPool(_ configuration: PostgresClient.Configuration, logger: Logger) -> (client: PostgresClient, runner: Task<Void, Never>) {
        let client = PostgresClient(configuration: configuration, eventLoopGroup: group, backgroundLogger: logger)
        return (client, Task { await client.run() })
    }

    /// Records that the server answered a query (the store's commits and health checks).
    func noteSuccess() { lastSuccess.withLock { $0 = clock() } }

    /// After an outage the pool tries the server again only when its backoff ends, which grows
    /// while the server is away (to a minute: a receiver came back 38 s after a 10-minute outage).
    /// Called once a connection of our own succeeded: when no query has succeeded for `quietFor`
    /// seconds, a new pool takes the old one's place at once, and the old one is stopped `grace`
    /// seconds of the database's clock later (what it still runs finishes or fails there). Returns whether it renewed.
    private func renewIfQuiet(quietFor: Double = 2, grace: Double = 30) -> Bool {
        guard hasPassed(quietFor, since: lastSuccess.withLock({ $0 }), now: clock()) else { return false }
        let old = pool.withLock { pool in
            let old = pool
            pool = Self.startPool(configuration, logger: logger)
            return old
        }
        noteSuccess()
        logger.notice("PostgreSQL answers again: a new connection pool replaces the one waiting out its backoff", metadata: ["risc.store": "\(url)"])
        Task { [clock] in
            await waitUntil(clock() + grace, clock: clock)
            old.runner.cancel()
        }
        return true
    }

    /// Opens and closes one connection of its own, apart from the pool, which reports only that
    /// it gave up, after its circuit breaker's wait: throws the cause at once, `refused` for what
    /// waiting will not fix (authentication, a missing database or role, TLS), `unavailable` for
    /// the rest.
    public func probe() async throws {
        let configuration = try self.connection.get()
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(on: Self.group.next(), configuration: configuration, id: 0, logger: logger).get()
        } catch {
            throw Self.classify(error, url: url)
        }
        try? await connection.close()
    }

    /// Why the server cannot be used, `error` being what the pool said, from a connection of our
    /// own (`probe`). When that connection succeeds after a quiet spell, the pool is the one stuck
    /// (`renewIfQuiet`) and is replaced: the next query runs on a new pool.
    public func diagnose(_ error: any Error) async -> StoreError {
        if let error = error as? PostgresTransactionError, let inner = error.closureError ?? error.beginError ?? error.commitError {
            return await diagnose(inner)
        }
        if let error = error as? StoreError, error.code == .refused { return error }
        if let error = error as? PSQLError, error.code == .server { return Self.classify(error, url: url) }
        do {
            try await probe()
        } catch {
            return error as? StoreError ?? Self.classify(error, url: url)
        }
        if renewIfQuiet() { return StoreError(.unavailable, "PostgreSQL at \(url) answers again; reconnecting") }
        return StoreError(.unavailable, "PostgreSQL at \(url) answers a new connection, the pool did not: \(Self.describe(error))")
    }

    /// `error` in the store's words where `explain` has them, else as it is.
    public static func explained(_ error: any Error) -> any Error { explain(error) ?? error }

    /// A driver error as PostgresNIO threw it, in the store's words: the server's message and
    /// SQLSTATE (`column "jti" does not exist (SQLSTATE 42703)`), not PostgresNIO's "Generic
    /// description to prevent accidental leakage" (its full text quotes the query's values: never
    /// shown); nil for any other error.
    public static func explain(_ error: any Error) -> StoreError? {
        if let error = error as? PostgresTransactionError, let inner = error.closureError ?? error.beginError ?? error.commitError {
            return explain(inner)
        }
        guard let error = error as? PSQLError else { return nil }
        guard error.code == .server else { return StoreError(.unavailable, "PostgreSQL: \(error.code)") }
        let message = error.serverInfo?[.message] ?? "an error"
        return StoreError(.failed, "PostgreSQL said: \(message) (SQLSTATE \(error.serverInfo?[.sqlState] ?? "unknown"))")
    }

    /// A connection's failure as an operator reads it.
    static func classify(_ error: any Error, url: PostgresStoreURL) -> StoreError {
        let at = "PostgreSQL at \(url)"
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                let state = error.serverInfo?[.sqlState] ?? ""
                let message = error.serverInfo?[.message] ?? "an error"
                switch state {
                case "28P01", "28000":
                    return StoreError(.refused, "\(at): authentication failed for user \(url.user) (\(message)); check store.password_file and pg_hba.conf")
                case "3D000":
                    return StoreError(.refused, "\(at): \(message); create it, or fix the database in store.url")
                case "42501":
                    return StoreError(.refused, "\(at): \(message)")
                default:
                    return StoreError(.unavailable, "\(at): the server said \(message) (SQLSTATE \(state))")
                }
            case .authMechanismRequiresPassword:
                return StoreError(.refused, "\(at): the server asks for a password and none is set (store.password_file)")
            case .unsupportedAuthMechanism, .saslError:
                return StoreError(.refused, "\(at): authentication failed for user \(url.user) (\(error.code))")
            case .sslUnsupported:
                return StoreError(.refused, "\(at): the server does not offer TLS, which store.url asks for (sslmode)")
            case .connectionError, .serverClosedConnection, .uncleanShutdown:
                if let underlying = error.underlying {
                    if underlying is NIOSSLError || underlying is BoringSSLError {
                        return StoreError(.refused, "\(at): TLS failed: \(underlying) (store.ca_file, sslmode)")
                    }
                    return StoreError(.unavailable, "\(at): cannot connect: \(url.socketPath.map { "socket \($0): " } ?? "")\(describe(underlying))")
                }
                return StoreError(.unavailable, "\(at): the connection closed (\(error.code))")
            default:
                return StoreError(.unavailable, "\(at): \(error.code)")
            }
        }
        if error is NIOSSLError || error is BoringSSLError {
            return StoreError(.refused, "\(at): TLS failed: \(error) (store.ca_file, sslmode)")
        }
        return StoreError(.unavailable, "\(at): cannot connect: \(describe(error))")
    }

    /// An error's own words: the system's for a socket (`connection refused`, `no such file`),
    /// not a type name.
    static func describe(_ error: any Error) -> String {
        if let error = error as? StoreError { return error.description }
        if let error = error as? PSQLError { return String(reflecting: error).prefix(300).description }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        if let error = error as? NIOConnectionError {
            guard error.connectionErrors.isEmpty else {
                return error.connectionErrors.map { "\(Self.address($0.target)): \(describe($0.error))" }.joined(separator: "; ")
            }
            // No address to try: the name did not resolve (both lookups failed, or found nothing).
            let lookup = [error.dnsAError, error.dnsAAAAError].compactMap { $0 }.first
            let why = (lookup as? SocketAddressError.UnknownHost)?.errorDescription ?? lookup.map { "\($0)" } ?? "no address"
            return "cannot resolve \(error.host): \(why)"
        }
        if let error = error as? ChannelError, case .connectTimeout(let amount) = error {
            return "no answer within \(amount.nanoseconds / 1_000_000_000) s"
        }
        return String(describing: error)
    }

    /// An address as a URL writes it: `127.0.0.1:5432`, `[::1]:5432`.
    static func address(_ target: SocketAddress) -> String {
        hostPort(target.ipAddress ?? "\(target)", target.port ?? 0)
    }

    /// The pool's own event loop: replies from the server are read at once, not behind the
    /// receiver's HTTP work (token verification) on the shared loops.
    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// That loop as a task executor: the receiver's committers run on it (`PostgresEventStore`), so
    /// a batch's statement is written, its rows read and its SETs answered on the thread that reads
    /// the server's replies, without a hop to the cooperative pool and back at every await.
    static let loopExecutor = LoopTaskExecutor(group.next())

    /// Stops the pool.
    public func close() { pool.withLock { $0.runner }.cancel() }

    deinit { pool.withLock { $0.runner }.cancel() }

    /// Refuses a server that would acknowledge a commit before it is on disk: `fsync` off, or
    /// `synchronous_commit` off for our sessions. `acceptUnsafe` (`store.accept_unsafe_durability`)
    /// overrides, for throwaway setups only.
    public func checkDurability(acceptUnsafe: Bool = false) async throws {
        let fsync = try await setting("fsync")
        let synchronousCommit = try await setting("synchronous_commit")
        var problems: [String] = []
        if fsync != "on" { problems.append("fsync is \(fsync)") }
        if synchronousCommit == "off" { problems.append("synchronous_commit is off") }
        guard problems.isEmpty || acceptUnsafe else {
            throw StoreError(
                .refused,
                """
                PostgreSQL at \(url) does not make commits durable (\(problems.joined(separator: ", "))): risc answers 202 only once \
                a SET is on disk, so it refuses this server. Turn them on, or set store.accept_unsafe_durability (never in production)
                """)
        }
        if !problems.isEmpty { logger.warning("PostgreSQL durability is off; accepted by configuration", metadata: ["risc.problems": "\(problems)"]) }
    }

    /// A server setting as our sessions see it.
    public func setting(_ name: String) async throws -> String {
        guard name.allSatisfy({ $0.isLetter || $0 == "_" }) else { throw StoreError(.failed, "bad setting name") }
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SHOW \(name)"), logger: logger)
        for try await value in rows.decode(String.self) { return value }
        return ""
    }

    /// The schema version in the database (0 before the first migration), read without migrating.
    public func schemaVersion() async throws -> Int {
        let exists = try await client.query("SELECT to_regclass('risc_schema') IS NOT NULL", logger: logger)
        for try await present in exists.decode(Bool.self) where !present { return 0 }
        for try await version in try await client.query("SELECT max(version) FROM risc_schema", logger: logger).decode(Int?.self) {
            return version ?? 0
        }
        return 0
    }

    /// Brings the schema to `PostgresSchema.version`; returns the version found and the one left.
    @discardableResult
    public func migrate() async throws -> (from: Int, to: Int) {
        try await client.withTransaction(logger: logger) { connection in
            // Any receiver starting now waits here until this one has committed.
            try await connection.query("SELECT pg_advisory_xact_lock(\(PostgresSchema.advisoryLock))", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS risc_schema (version INTEGER NOT NULL)", logger: logger)
            var current = 0
            var found = false
            for try await version in try await connection.query("SELECT version FROM risc_schema", logger: logger).decode(Int.self) {
                current = version
                found = true
            }
            if !found { try await connection.query("INSERT INTO risc_schema (version) VALUES (0)", logger: logger) }
            if current > PostgresSchema.version {
                throw StoreError.newerSchema(found: Int64(current), known: Int64(PostgresSchema.version), store: "PostgreSQL at \(url)")
            }
            guard current < PostgresSchema.version else { return (current, current) }
            for version in (current + 1)...PostgresSchema.version {
                for statement in PostgresSchema.migrations[version] ?? [] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
            }
            try await connection.query("UPDATE risc_schema SET version = \(PostgresSchema.version)", logger: logger)
            return (current, PostgresSchema.version)
        }
    }
}

extension PostgresDatabase {
    /// Checks the token-fingerprint key against the check value the shared store records (and
    /// records it on first use): every receiver must fingerprint tokens with the same key, or a
    /// token linked through one would never match an event handled by another. `key` is nil when
    /// `accounts.token_key_file` is not set, which a shared store refuses.
    public func checkTokenKey(_ key: [UInt8]?, file: String?) async throws {
        guard let key, let file else {
            throw StoreError(
                .refused,
                """
                a shared store needs accounts.token_key_file: every receiver must fingerprint tokens with the same key \
                (make one with `risc keys token-key --out FILE` and give each receiver a copy)
                """)
        }
        let check = TokenFingerprint.keyCheckValue(key)
        try await client.query(
            "INSERT INTO meta (name, value) VALUES ('token_key_check', \(check)) ON CONFLICT (name) DO NOTHING", logger: logger)
        var recorded: String?
        for try await value in try await client.query("SELECT value FROM meta WHERE name = 'token_key_check'", logger: logger)
            .decode(String.self)
        {
            recorded = value
        }
        guard let recorded, TokenFingerprint.constantTimeEquals(recorded, check) else {
            throw StoreError(
                .refused,
                """
                accounts.token_key_file \(file) is not the key this shared store's token fingerprints were made with \
                (check value \(check.prefix(12))…, the store's \((recorded ?? "").prefix(12))…): give every receiver the same key file
                """)
        }
    }
}

/// Runs a task's jobs on one event loop (`Task(executorPreference:)`): a continuation resumed on
/// that loop, as PostgresNIO resumes its queries', goes on with the task there, in the same turn
/// of the loop, instead of waking a thread of the cooperative pool.
final class LoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop
    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
