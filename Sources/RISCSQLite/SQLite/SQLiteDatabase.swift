import CSQLite
import Foundation
import RISCCore
import Synchronization

/// The embedded store's file, and the one place its connections are made: each with the settings
/// of its role, the schema migrated before the first is handed out. Every part of the store (the
/// group-commit writer, the queue, the accounts, the ledger, retention, the commands' readers)
/// connects through it; in-process writers then take `WriteLock`, and SQLite's own locks (with a
/// busy timeout) order this process against a command run beside it.
struct SQLiteDatabase: Sendable {
    /// What a connection is for.
    enum Role {
        /// The group-commit writer: no sync inside COMMIT (its syncer fsyncs the WAL before any
        /// answer), checkpoints on a thread of their own, a large page cache.
        case groupCommit
        /// Short transactions that are durable when COMMIT returns (accounts, queue, ledger).
        case transactions
        /// Reads and occasional writes by a command or a background pass, with SQLite's defaults.
        case plain
    }

    let path: String

    /// The store in `directory`. `mustExist`: a command's view of a store that must be there
    /// already (it names the data directory it looked in, instead of making an empty store).
    init(directory: String, mustExist: Bool = false) throws {
        path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        if mustExist, !FileManager.default.fileExists(atPath: path) {
            throw StoreError(.failed, "no store at \(path): has `risc serve` run with this data directory?")
        }
    }

    func connect(_ role: Role) throws(StoreError) -> SQLiteConnection {
        do { return try connectAndMigrate(role) } catch { throw error.opening(path) }
    }

    private func connectAndMigrate(_ role: Role) throws(StoreError) -> SQLiteConnection {
        let connection = try SQLiteConnection(path: path)
        switch role {
        case .groupCommit:
            try connection.execute("PRAGMA journal_mode = WAL")
            try connection.execute("PRAGMA synchronous = NORMAL")
            try connection.execute("PRAGMA foreign_keys = ON")
            try connection.execute("PRAGMA cache_size = -8192")
            try connection.execute("PRAGMA wal_autocheckpoint = 0")
        case .transactions:
            try connection.execute("PRAGMA journal_mode = WAL")
            try connection.execute("PRAGMA synchronous = FULL")
            try connection.execute("PRAGMA foreign_keys = ON")
            // Account, session and token lookups touch pages all over the file: keep more of them in memory.
            try connection.execute("PRAGMA cache_size = -8192")
        case .plain:
            break
        }
        if let migrated = try SQLiteEventStore.migrate(connection) { Self.migrations.withLock { $0[path] = migrated } }
        return connection
    }

    /// Migrations done by `connect`, by file, until `SQLiteStore` logs them (`takeMigration`).
    private static let migrations = Mutex<[String: (from: Int64, to: Int64)]>([:])

    /// The migration the store in `directory` went through since last asked, if any.
    static func takeMigration(directory: String) -> (from: Int64, to: Int64)? {
        guard let path = try? SQLiteDatabase(directory: directory).path else { return nil }
        return migrations.withLock { $0.removeValue(forKey: path) }
    }
}
