import Foundation
public import Logging
public import RISCCore
public import RISCSQL
import Synchronization

/// The embedded driver, whole, shaped like the shared one (`SharedStore`): one owner for the store
/// in a data directory and for the connections its parts hold (the group-commit writer with its
/// reader and checkpointer, the queue's, the accounts', the ledger's, retention's, the commands'
/// reader), each part opened when first asked for, all closed together.
///
/// A receiver opens the event store, the queue and the accounts at its start; a command that only
/// lists the queue opens nothing else (and needs no token key).
public final class SQLiteStore: Sendable {
    public let directory: String
    /// `accounts.token_key_file`, else the data directory's `token-key`.
    public let tokenKeyFile: String?
    let logger: Logger
    let clock: @Sendable () -> Double

    private struct Parts: Sendable {
        var events: SQLiteEventStore?
        var queue: EmbeddedWorkQueue?
        var accounts: AccountStore?
        var admin: (any QueueAdministration)?
        var verifications: (any VerificationRequests)?
        var retention: SQLiteRetention?
        var tokenKey: [UInt8]?
    }
    private let parts = Mutex(Parts())

    /// `clock`: the times the store records (the receiver's wall clock).
    public init(
        directory: String, tokenKeyFile: String? = nil, logger: Logger, clock: @escaping @Sendable () -> Double = systemNow
    ) {
        self.directory = directory
        self.tokenKeyFile = tokenKeyFile
        self.logger = logger
        self.clock = clock
    }

    /// The part at `path`, opened by `open` the first time.
    private func part<T: Sendable>(_ path: WritableKeyPath<Parts, T?>, _ open: () throws -> T) throws -> T {
        try parts.withLock { parts in
            if let part = parts[keyPath: path] { return part }
            let part = try open()
            parts[keyPath: path] = part
            if let (from, to) = SQLiteDatabase.takeMigration(directory: directory) {
                logger.noteMigration(store: directory, from: from, to: to)
            }
            return part
        }
    }

    /// Throws (naming the file looked for) when `directory` holds no embedded store: for what reads
    /// a store that must be there, before it takes the directory's lock (which would make it).
    public static func requireStore(in directory: String) throws {
        _ = try SQLiteDatabase(directory: directory, mustExist: true)
    }

    /// The schema version of the store on disk, read without migrating it; nil without a store.
    public func schemaVersion() throws -> (found: Int64, known: Int64)? {
        let path = try SQLiteDatabase(directory: directory).path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let version: Int64
        do { version = try SQLiteConnection(path: path).scalar("PRAGMA user_version") ?? 0 } catch { throw error.opening(path) }
        return (version, Schema.version)
    }

    /// The event store (its writer, syncer and checkpointer threads start with it).
    public func events() throws -> SQLiteEventStore { try part(\.events) { try SQLiteEventStore(directory: directory, logger: logger, wallClock: clock) } }
    /// The token-fingerprint key, loaded and checked against the store once for every part that
    /// needs it (the accounts, the queue, the writer's inline actions).
    public func tokenKey() throws -> [UInt8] {
        try part(\.tokenKey) {
            try PrivateFiles.makeDirectory(directory)
            return try AccountStore.loadKey(directory: directory, file: tokenKeyFile)
        }
    }
    public func queue() throws -> EmbeddedWorkQueue {
        let key = try tokenKey()
        return try part(\.queue) { try EmbeddedWorkQueue(directory: directory, tokenKey: key) }
    }
    public func accounts() throws -> AccountStore {
        let key = try tokenKey()
        return try part(\.accounts) { try AccountStore(directory: directory, tokenKey: key) }
    }
    /// The queue's administration; the store must exist already (a command names where it looked).
    public func admin() throws -> any QueueAdministration { try part(\.admin) { try Self.queueAdmin(directory: directory) } }
    /// The queue's administration of the store in `directory`, which must exist.
    public static func queueAdmin(directory: String) throws -> any QueueAdministration { SQLQueueAdmin(session: try session(directory: directory)) }
    /// A session of its own on the store in `directory`, which must exist (`risc store copy` reads it).
    public static func session(directory: String) throws -> any SQLSession {
        try SQLiteSession(SQLiteDatabase(directory: directory, mustExist: true), .plain)
    }
    public func verifications() throws -> any VerificationRequests {
        try part(\.verifications) {
            try PrivateFiles.makeDirectory(directory)
            return SQLVerifications(session: try SQLiteSession(SQLiteDatabase(directory: directory), .transactions))
        }
    }
    public func retention() throws -> SQLiteRetention { try part(\.retention) { try SQLiteRetention(directory: directory) } }

    /// Closes the event store (after its last commit is synced); the other parts' connections
    /// close when they are released.
    public func close() { parts.withLock { $0.events }?.close() }

    /// A store let go is closed: its event store's threads hold that until it is.
    deinit { close() }
}
