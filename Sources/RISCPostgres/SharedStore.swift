import Foundation
public import Logging
public import RISCCore
public import RISCSQL

/// Everything a receiver or a CLI command needs from the shared PostgreSQL store, behind the
/// Core ports: `EventStore`, `WorkQueue`, `AccountRepository`, `QueueAdministration`,
/// `VerificationRequests`, `StoreHealth`, `RetentionStore`.
public final class SharedStore: Sendable {
    public let database: PostgresDatabase
    public let events: PostgresEventStore
    public let queue: PostgresWorkQueue
    public let accounts: PostgresAccounts
    public let admin: any QueueAdministration
    public let verifications: any VerificationRequests
    /// The store as the cold paths' statements take it.
    public let session: any SQLSession
    public let leases: PostgresLeases

    /// Where the store is and how to open it (`store.*` settings).
    public struct Settings: Sendable {
        /// `store.url`, parsed when the configuration was read.
        public var url: PostgresStoreURL
        /// `store.password_file`: the password, never in the URL.
        public var passwordFile: String?
        /// `store.ca_file`: the CA bundle that verifies the server (`sslmode=verify-full`).
        public var caFile: String?
        /// `accounts.token_key_file`: required, one key for every receiver.
        public var tokenKeyFile: String?
        /// `store.accept_unsafe_durability`: accept a server with `fsync` or `synchronous_commit` off.
        public var acceptUnsafeDurability = false
        /// Whether the token key is required: a receiver and the account commands need it; the
        /// queue and replay commands, which never fingerprint a token, do not.
        public var needsTokenKey = true
        /// `store.timeout`: seconds a SET may wait to be committed before it is answered 503.
        public var timeout: Double = 5
        /// The times the store records (the receiver's wall clock).
        public var clock: @Sendable () -> Double = systemNow

        public init(url: PostgresStoreURL, passwordFile: String? = nil, caFile: String? = nil, tokenKeyFile: String? = nil) {
            self.url = url
            self.passwordFile = passwordFile
            self.caFile = caFile
            self.tokenKeyFile = tokenKeyFile
        }
    }

    /// Opens the pool and checks what can be checked without the server: the URL, the password
    /// and CA files, the token key. `prepare()` then talks to the server.
    public init(settings: Settings, logger: Logger) throws {
        let url = settings.url
        var password: String?
        if let file = settings.passwordFile {
            if let problem = url.passwordProblem { throw StoreError(.refused, problem) }
            let data: [UInt8]
            do { data = try FileContents.readText(file) } catch { throw StoreError(.refused, "store.password_file: \(error)") }
            password = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
        }
        if let ca = settings.caFile, !FileManager.default.isReadableFile(atPath: ca) {
            throw StoreError(.refused, "store.ca_file: cannot read \(ca)")
        }
        // Without the key (allowed only when not needed) account lookups by token match nothing.
        let key = settings.needsTokenKey || settings.tokenKeyFile != nil ? try Self.tokenKey(file: settings.tokenKeyFile) : []
        self.settings = settings
        tokenKey = key
        database = PostgresDatabase(url: url, password: password, caFile: settings.caFile, logger: logger)
        events = PostgresEventStore(database: database, commitDeadline: settings.timeout, wallClock: settings.clock)
        queue = PostgresWorkQueue(database: database, tokenKey: key)
        accounts = PostgresAccounts(database: database, tokenKey: key)
        session = PostgresSession(database: database)
        admin = SQLQueueAdmin(session: session)
        verifications = SQLVerifications(session: session)
        leases = PostgresLeases(database: database)
    }

    public let settings: Settings
    public let tokenKey: [UInt8]

    /// The shared token key from `accounts.token_key_file` (required with a shared store).
    static func tokenKey(file: String?) throws -> [UInt8] {
        guard let file else {
            throw StoreError(
                .refused,
                """
                a shared store needs accounts.token_key_file: every receiver must fingerprint tokens with the same key \
                (make one with `risc keys token-key --out FILE` and give each receiver a copy)
                """)
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw StoreError(.refused, "accounts.token_key_file \(file) cannot be read: create it with `risc keys token-key --out \(file)`")
        }
        guard data.count >= 32 else { throw StoreError(.refused, "accounts.token_key_file \(file) holds \(data.count) bytes; a token key has at least 32") }
        return Array(data)
    }

    /// Talks to the server: migrates the schema, refuses a server that is not durable and a token
    /// key that is not the store's. Throws `StoreError` with code `refused` for
    /// refusals (retrying cannot help), anything else for a server that cannot be reached.
    /// A failure names its cause (`PostgresDatabase.diagnose`): `refused` for what waiting will
    /// not fix, so a receiver exits with a configuration status instead of retrying for ever.
    public func prepare() async throws {
        let (from, to) = try await migrate()
        if from != to {
            database.logger.noteMigration(store: "\(database.url)", from: from, to: to)
        }
        do {
            try await database.checkDurability(acceptUnsafe: settings.acceptUnsafeDurability)
            if !tokenKey.isEmpty { try await database.checkTokenKey(tokenKey, file: settings.tokenKeyFile) }
        } catch {
            throw await database.diagnose(error)
        }
    }

    /// Brings the schema to this binary's (`PostgresDatabase.migrate`) after a connection of our
    /// own reached the server: the pool would wait for a server it cannot reach for ever
    /// (`risc store migrate` and `risc store copy` did), where the probe says why at once.
    public func migrate() async throws -> (from: Int, to: Int) {
        try await database.probe()
        do { return try await database.migrate() } catch { throw await database.diagnose(error) }
    }

    /// Applies each new SET's actions in the transaction that stores it (no webhook: the store's
    /// accounts are the sink). What fails there is queued for the workers.
    public func enableInlineActions(table: ActionTable) { events.enableInlineActions(table: table, tokenKey: tokenKey) }

    public func close() { database.close() }
}
