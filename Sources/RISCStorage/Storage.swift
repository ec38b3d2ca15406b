import Foundation
public import Logging
public import RISCCore
import RISCLocal
import RISCPostgres
import RISCSQL
public import RISCSQLite
import Synchronization

/// A receiver's or a command's store, whichever the driver, behind the Core ports: the embedded
/// SQLite store in the data directory (no `store.url`) or a PostgreSQL store shared by several
/// receivers. This is the one factory: the server, every command, the drills and the benchmarks
/// open their store here, and no other target imports a driver.
///
/// Opening checks what can be checked without a server; `prepare` talks to one. Each part is
/// opened when first asked for (an embedded store's event store starts its writer threads then),
/// so a command that lists the queue opens nothing else and needs no token key.
public final class Storage: Sendable {
    public let settings: StoreSettings
    public let dataDirectory: String
    /// `accounts.token_key_file` (the embedded store's default is the data directory's `token-key`).
    public let tokenKeyFile: String?

    enum Driver: Sendable {
        case embedded(SQLiteStore)
        case shared(SharedStore)
    }
    let driver: Driver
    /// The embedded store's leases (one process holds its data directory).
    private let embeddedLeases = LocalLeases()
    private let listener = Mutex<Task<Void, Never>?>(nil)

    /// `needsTokenKey`: the caller reads or writes accounts (a shared store checks its key file now).
    /// `clock`: the times the store records (`processed_at`, when actions were applied): the receiver's.
    public init(
        settings: StoreSettings, dataDirectory: String, tokenKeyFile: String?, needsTokenKey: Bool = true, logger: Logger,
        clock: @escaping @Sendable () -> Double = systemNow
    ) throws {
        self.settings = settings
        self.dataDirectory = dataDirectory
        self.tokenKeyFile = tokenKeyFile
        guard let url = settings.url else {
            driver = .embedded(SQLiteStore(directory: dataDirectory, tokenKeyFile: tokenKeyFile, logger: logger, clock: clock))
            return
        }
        var shared = SharedStore.Settings(url: url.postgres, passwordFile: settings.passwordFile, caFile: settings.caFile, tokenKeyFile: tokenKeyFile)
        shared.acceptUnsafeDurability = settings.acceptUnsafeDurability
        shared.timeout = settings.timeout
        shared.needsTokenKey = needsTokenKey
        shared.clock = clock
        driver = .shared(try SharedStore(settings: shared, logger: logger))
    }

    /// An error that reached a command's top as a driver threw it, in the store's words
    /// (`StoreError`; PostgreSQL's own message and SQLSTATE); any other error as it is.
    public static func explain(_ error: any Error) -> any Error { PostgresDatabase.explained(error) }

    /// `embedded` or `postgresql`.
    public var backendName: String { settings.backendName }

    /// A shared store: migrates the schema, refuses a server that is not durable and a token key
    /// that is not the store's (`StoreError` `refused`); anything else is a server not reached.
    /// Nothing to do for the embedded store (it migrates as it opens).
    public func prepare() async throws {
        if case .shared(let store) = driver { try await store.prepare() }
    }

    /// `prepare`, waiting for a server that cannot be reached yet (again every `retryEvery`
    /// seconds) but giving up at once on a refusal (authentication, a missing database, TLS,
    /// durability: waiting will not fix them): how a receiver starts. The cause is logged when
    /// it is first seen or changes, and the recovery once, not every attempt. `sleep` waits (tests
    /// drive it).
    public func prepare(
        logger: Logger, retryEvery: Double = 2,
        sleep: @Sendable (Double) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }
    ) async throws {
        var attempts = 0, lastCause: String?
        while true {
            do {
                try await prepare()
                if attempts > 0 {
                    logger.notice("PostgreSQL store reachable", metadata: ["risc.store": "\(settings.url?.description ?? "")", "risc.attempts": "\(attempts + 1)"])
                }
                return
            } catch  where !StoreError.isRefusal(error) && !Task.isCancelled {
                attempts += 1
                let cause = "\(error)"
                if cause != lastCause {
                    logger.warning(
                        "PostgreSQL store not reachable yet; retrying every \(String(format: "%g", retryEvery)) s",
                        metadata: ["risc.store": "\(settings.url?.description ?? "")", "risc.error": "\(cause)"])
                    lastCause = cause
                }
                try await sleep(retryEvery)
            }
        }
    }

    /// The embedded store's part or the shared store's.
    private func part<T>(_ embedded: (SQLiteStore) throws -> T, _ shared: (SharedStore) throws -> T) rethrows -> T {
        switch driver {
        case .embedded(let store): try embedded(store)
        case .shared(let store): try shared(store)
        }
    }

    public func events() throws -> any EventStore & StoreHealth { try part({ try $0.events() }, { $0.events }) }
    public func queue() throws -> any WorkQueue { try part({ try $0.queue() }, { $0.queue }) }
    public func accounts() throws -> any AccountRepository { try part({ try $0.accounts() }, { $0.accounts }) }
    /// The accounts for a caller that must answer: on a shared store each call gives up after
    /// `seconds` (`DeadlineAccounts`), where a server gone away held it for the pool's minute or
    /// for ever; the embedded store's as they are.
    public func accounts(within seconds: Double, clock: @escaping @Sendable () -> Double) throws -> any AccountRepository {
        let accounts = try accounts()
        guard case .shared = driver else { return accounts }
        return DeadlineAccounts(accounts, seconds: seconds, clock: clock)
    }
    /// The token-fingerprint key the store matches tokens with.
    public func tokenKey() throws -> [UInt8] { try part({ try $0.tokenKey() }, { $0.tokenKey }) }
    /// The queue's administration (`risc queue`, replay); the embedded store must exist already.
    public func admin() throws -> any QueueAdministration { try part({ try $0.admin() }, { $0.admin }) }
    public func verifications() throws -> any VerificationRequests { try part({ try $0.verifications() }, { $0.verifications }) }
    /// The queue's administration and `stream verify`'s requests for a command: on a shared store
    /// each call gives up after `seconds` (`DeadlineSession`), where a server that stopped answering
    /// held the command for ever; the embedded store's as they are.
    public func admin(within seconds: Double, clock: @escaping @Sendable () -> Double) throws -> any QueueAdministration {
        guard case .shared(let store) = driver else { return try admin() }
        return SQLQueueAdmin(session: DeadlineSession(store.session, seconds: seconds, clock: clock))
    }
    public func verifications(within seconds: Double, clock: @escaping @Sendable () -> Double) throws -> any VerificationRequests {
        guard case .shared(let store) = driver else { return try verifications() }
        return SQLVerifications(session: DeadlineSession(store.session, seconds: seconds, clock: clock))
    }
    public func retention() throws -> any RetentionStore { try part({ try $0.retention() }, { $0.events }) }
    /// Named leases: in memory for the embedded store (one process holds its data directory), in the shared store's `leases` table.
    public func leases() -> any LeaseStore { part({ _ in embeddedLeases }, { $0.leases }) }

    /// Bytes the store's SETs and actions take: pages in use (embedded), or the tables' size after
    /// VACUUM FULL (PostgreSQL: what tables that reuse their freed space settle at).
    public func bytesInUse() async throws -> Double {
        switch driver {
        case .embedded(let store): try store.retention().bytesInUse()
        case .shared(let store): try await store.events.compactedBytes()
        }
    }

    /// Applies each new SET's actions in the transaction that stores it (no webhook: the store's
    /// accounts are the sink); what fails there is queued for the workers. `log`: where the
    /// embedded writer writes the applied lines of what it stores (the shared store hands them back).
    public func enableInlineActions(table: ActionTable, log: any EventLog) throws {
        switch driver {
        case .embedded(let store):
            try store.events().enableInlineActions(table: table, log: log, tokenKey: store.tokenKey())
        case .shared(let store): store.enableInlineActions(table: table)
        }
    }

    /// The embedded store's journal for pushed SETs (`SETJournal`), opened after indexing what a
    /// previous run journaled and did not index (the receiver only: it holds the data directory).
    /// Nothing on a shared store: every receiver there commits to the server before its 202.
    /// Journaled SETs gather for `SQLiteEventStore.receiverIndexLinger` before they are indexed.
    public func openJournal(log: any EventLog) throws {
        if case .embedded(let store) = driver { try store.events().openJournal(log: log, indexLinger: SQLiteEventStore.receiverIndexLinger) }
    }

    /// A reloaded action table (SIGHUP) for the SETs stored from now on, when actions are inline.
    public func updateInlineTable(_ table: ActionTable) throws {
        switch driver {
        case .embedded(let store): try store.events().updateInlineTable(table)
        case .shared(let store): store.events.updateInlineTable(table)
        }
    }

    /// How a receiver's workers run on this store: how many (each claims its own batches), how
    /// large a batch, and what they wait for.
    public struct WorkerShape: Sendable {
        public let count: Int
        public let batch: Int
        public let deferWhile: (@Sendable () -> Bool)?
    }

    /// The embedded store has one writer: one worker, a small batch, waiting while acknowledgements
    /// do. On the shared store four, so while one waits for the server or a webhook the others
    /// work; applied in the store a batch is one transaction, webhook deliveries go one at a time.
    public func workerShape(webhook: Bool) throws -> WorkerShape {
        switch driver {
        case .embedded(let store):
            // Weakly: the store's after-commit hook holds the workers (`wakeOnWork`), so a worker
            // holding the store kept both, and the queue with its thread, once the receiver stopped.
            let events = try store.events()
            return WorkerShape(count: 1, batch: 8, deferWhile: { [weak events] in events?.isBusy ?? false })
        case .shared: return WorkerShape(count: 4, batch: webhook ? 8 : 64, deferWhile: nil)
        }
    }

    /// Calls `wake` when work is queued: after this receiver's commits that leave work, and on a
    /// shared store when any receiver's do (a listener, stopped by `close`).
    public func wakeOnWork(_ wake: @escaping @Sendable () -> Void) throws {
        switch driver {
        case .embedded(let store): try store.events().afterCommit = wake
        case .shared(let store):
            store.events.afterCommit.withLock { $0 = wake }
            let queue = store.queue
            listener.withLock { $0 = Task { await queue.listen(wake: wake) } }
        }
    }

    /// `risc store migrate`: brings the schema to this version; what was done, as a line.
    public func migrate() async throws -> String {
        switch driver {
        case .embedded(let store):
            _ = try store.admin()  // opening migrates the embedded store
            return "embedded store in \(store.directory): schema current"
        case .shared(let store):
            let (from, to) = try await store.migrate()
            return "PostgreSQL store \(store.database.url): " + (from == to ? "schema version \(to), current" : "schema version \(from) → \(to)")
        }
    }

    /// `risc store status`: the backend, where it is, its schema version against this binary's,
    /// the queue's counts (when the schema is current: reading them would migrate an older one), and for the
    /// embedded store the pid of the `risc serve` holding its data directory.
    public func status(now: Double = systemNow()) async throws -> JSONObject {
        var object = JSONObject()
        switch driver {
        case .embedded(let store):
            object["backend"] = "embedded"
            object["data_dir"] = .string(store.directory)
            object["serving_pid"] = DataDirectoryLock.holder(directory: store.directory).map { .string($0) } ?? .null
            if let moved = MovedMarker.refusal(in: store.directory) { object["moved"] = .string(moved.description) }
            // Acknowledged SETs a crash left in the journal only: the next risc serve indexes them first.
            object["journaled_not_indexed"] = .number(Double(try SQLiteEventStore.journaledNotIndexed(directory: store.directory)))
            // Segments a start found damaged and kept aside, with SETs that could not be indexed.
            object["journal_damaged"] = .array(SQLiteEventStore.damagedJournalSegments(directory: store.directory).map { .string("journal/damaged/" + $0) })
        case .shared(let store):
            object["backend"] = "postgresql"
            object["url"] = .string("\(store.database.url)")
        }
        guard let (found, known, _) = try await schema() else { throw StoreError(.failed, "no store in \(dataDirectory)") }
        object["schema"] = [
            "version": .number(Double(found)), "this_binary": .number(Double(known)),
            "state": .string(found == known ? "current" : found < known ? "older: risc serve or risc store migrate brings it up" : "newer: refused by this binary"),
        ]
        if found == known { object["queue"] = .object(try await admin().counts(now: now).json) }
        return object
    }

    /// `risc serve --check-config --connect`: what a start would find, read only (nothing is
    /// migrated or recorded): for PostgreSQL one connection (the cause if it fails), durability and
    /// the schema version; for the embedded store its schema version, or that the first start
    /// makes it. A newer schema, or a server that does not make commits durable, is refused.
    public func check() async throws -> String {
        guard let (found, known, what) = try await schema() else { return "embedded store: none yet in \(dataDirectory); the first start makes it" }
        if case .shared(let store) = driver { try await store.database.checkDurability(acceptUnsafe: store.settings.acceptUnsafeDurability) }
        if found > known { throw StoreError.newerSchema(found: found, known: known, store: what) }
        return "\(what): reachable, schema version \(found)\(found == known ? " (current)" : " (older: the start migrates it to \(known))")"
    }

    /// The schema version on disk or on the server and this binary's, read without migrating (a
    /// PostgreSQL server is reached with a connection of our own first, for its cause if it fails);
    /// nil when there is no embedded store yet.
    private func schema() async throws -> (found: Int64, known: Int64, what: String)? {
        switch driver {
        case .embedded(let store):
            return try store.schemaVersion().map { ($0.found, $0.known, "embedded store in \(store.directory)") }
        case .shared(let store):
            try await store.database.probe()
            return (Int64(try await store.database.schemaVersion()), Int64(PostgresSchema.version), "PostgreSQL \(store.database.url)")
        }
    }

    /// The embedded driver, for tests that read its rows directly.
    public var embedded: SQLiteStore? {
        if case .embedded(let store) = driver { return store }
        return nil
    }

    /// Closes the store (stopping a listener first); workers on it must be stopped before.
    public func close() {
        listener.withLock { $0 }?.cancel()
        part({ $0.close() }, { $0.close() })
    }
}
