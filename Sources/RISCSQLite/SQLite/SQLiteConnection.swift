import CSQLite
import Foundation
import RISCCore
import RISCSQL
import Synchronization

extension StoreError {
    /// A failure SQLite reported with result code `rc` (`SQLITE_FULL` = 13 when the disk is full).
    init(sqlite rc: Int32, _ description: String) {
        let code: Code =
            switch rc & 0xFF {
            case SQLITE_FULL: .diskFull
            case SQLITE_MISUSE: .closed
            default: .failed
            }
        self.init(code, description, driverCode: rc)
    }

    /// What a failure at the opening of the store's file means. A file that is not a database, or
    /// a damaged one, is a refusal (exit 64, not restarted): no retry mends it, and the operator is
    /// told which file and what to do. Anything else is left as it was.
    func opening(_ path: String) -> StoreError {
        guard code != .refused, let rc = driverCode, [SQLITE_NOTADB, SQLITE_CORRUPT].contains(rc & 0xFF) else { return self }
        return StoreError(
            .refused,
            """
            \(path) is not a readable risc store (\(description)): it is damaged, or another file is in its place. Stop every risc \
            that uses it, move it aside (with any -wal and -shm file beside it) and restore the last backup (docs/operations.md, backups)
            """, driverCode: rc)
    }
}

/// One SQLite connection. Not thread-safe: each is used by one thread at a time.
final class SQLiteConnection {
    let handle: OpaquePointer
    /// The in-process write lock of this connection's database file (`WriteLock`).
    let writeLock: NSLock
    private var statements: [String: SQLiteStatement] = [:]

    init(path given: String, readOnly: Bool = false) throws(StoreError) {
        // The directory's links followed here: SQLite refuses a path with a link anywhere in it
        // (below), and a data directory on a linked disk is an ordinary layout; the file's own
        // name is never followed.
        let directory = PathText.directory(of: given)
        let path = directory.isEmpty ? given : PrivateFiles.resolvedDirectory(directory) + "/" + (given.split(separator: "/").last ?? "")
        var handle: OpaquePointer?
        if !readOnly {
            // Created here with mode 0600 (whatever the umask); SQLite gives -wal and -shm the same.
            do { try PrivateFiles.createIfMissing(path) } catch { throw StoreError(sqlite: SQLITE_CANTOPEN, "\(error)") }
        }
        // Never through a symbolic link (SQLite refuses a path with one in it, SQLITE_CANTOPEN_SYMLINK).
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            var message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let systemError = handle.map { sqlite3_system_errno($0) } ?? 0
            if systemError != 0 { message += " (\(String(cString: strerror(systemError))))" }
            if let handle { sqlite3_close_v2(handle) }
            // A directory in the file's place, or no permission: a restart would fail the same way.
            let lasting = [EISDIR, EACCES, EPERM, ENOTDIR, ELOOP, EROFS].contains(systemError)
            throw lasting ? StoreError(.refused, "cannot open \(path): \(message)", driverCode: rc) : StoreError(sqlite: rc, "cannot open \(path): \(message)")
        }
        self.handle = handle
        writeLock = WriteLock.lock(path: path)
        sqlite3_busy_timeout(handle, 5_000)
        sqlite3_extended_result_codes(handle, 1)
    }

    /// How long a statement waits for another connection's lock before it fails with
    /// SQLITE_BUSY (5 s from the open on).
    func busyTimeout(milliseconds: Int32) { sqlite3_busy_timeout(handle, milliseconds) }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, _ context: String) -> StoreError {
        StoreError(sqlite: rc, "\(context): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: committed when it returns, rolled back
    /// when it throws.
    func immediateTransaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    func execute(_ sql: String) throws(StoreError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? ""
            sqlite3_free(message)
            throw StoreError(sqlite: rc, "\(sql.prefix(60)): \(text)")
        }
    }

    func prepare(_ sql: String) throws(StoreError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, "prepare") }
        return SQLiteStatement(statement, connection: self)
    }

    /// A prepared statement kept for reuse (compiling SQL costs more than running it).
    func cached(_ sql: String) throws(StoreError) -> SQLiteStatement {
        if let statement = statements[sql] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql)
        statements[sql] = statement
        return statement
    }

    /// Rows changed by the last statement.
    var changes: Int64 { Int64(sqlite3_changes(handle)) }

    /// The rowid of the last row inserted on this connection.
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The first column of the first row of a query, as an integer.
    func scalar(_ sql: String) throws(StoreError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.isNull(0) ? nil : statement.int(0)
    }
}

/// A prepared statement, reset after each use.
final class SQLiteStatement {
    let handle: OpaquePointer
    unowned let connection: SQLiteConnection

    init(_ handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    func bind(_ values: [SQLiteValue]) throws(StoreError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        try bindAll(values) { index, text in
            var text = text
            // With its length: no strlen over long tokens, no C-string bridging.
            return text.withUTF8 { utf8 in
                utf8.withMemoryRebound(to: CChar.self) { text in
                    guard let base = text.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, risc_sqlite_transient()) }
                    return sqlite3_bind_text(handle, index, base, Int32(text.count), risc_sqlite_transient())
                }
            }
        }
    }

    /// Binds `values` in order, texts through `bindText` (`bind` and `run` bind them each their way).
    private func bindAll(_ values: [SQLiteValue], text bindText: (Int32, String) -> Int32) throws(StoreError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .int(let v): rc = sqlite3_bind_int64(handle, index, v)
            case .double(let v): rc = sqlite3_bind_double(handle, index, v)
            case .text(let v): rc = bindText(index, v)
            }
            guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
        }
    }

    /// Steps once: true when a row is available, false when done.
    func step() throws(StoreError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            return false
        default:
            sqlite3_reset(handle)
            throw connection.error(rc, "step")
        }
    }

    /// Runs to completion. Its texts are copied once, into one buffer SQLite reads in place
    /// (`SQLITE_STATIC`) and that is unbound before it goes: SQLite's own copy of each text
    /// (`SQLITE_TRANSIENT`, as `bind` binds) was a dozen allocations for every SET stored.
    func run(_ values: [SQLiteValue] = []) throws(StoreError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        var bytes = 0
        for case .text(let text) in values { bytes += text.utf8.count }
        let arena = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes, 1), alignment: 1)
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            arena.deallocate()
        }
        var used = 0
        try bindAll(values) { index, text in
            var text = text
            let start = used
            text.withUTF8 { utf8 in
                UnsafeMutableRawBufferPointer(rebasing: arena[start..<start + utf8.count]).copyMemory(from: UnsafeRawBufferPointer(utf8))
                used += utf8.count
            }
            // Never a null pointer, even for "": SQLite would bind NULL.
            let bytes = arena.baseAddress!.advanced(by: start).assumingMemoryBound(to: CChar.self)
            return sqlite3_bind_text(handle, index, bytes, Int32(used - start), nil)
        }
        while try step() {}
    }

    func reset() { sqlite3_reset(handle) }

    /// How many columns a row of this statement has.
    var columns: Int32 { sqlite3_column_count(handle) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    enum ColumnType { case null, int, double, text }

    /// The storage class of a column's value in the current row (a BLOB reads as text).
    func type(_ column: Int32) -> ColumnType {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: .null
        case SQLITE_INTEGER: .int
        case SQLITE_FLOAT: .double
        default: .text
        }
    }
    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: pointer)
    }
}

/// The values statements bind (`SQLValue`, which the cold paths share with PostgreSQL).
typealias SQLiteValue = SQLValue

/// Serialises write transactions on one database file within this process. SQLite allows one
/// writer at a time and makes the others wait in its busy handler, which sleeps in steps of
/// milliseconds; waiting on a lock instead wakes the next writer the moment the current one
/// commits. One lock a file: stores in other data directories (a test process holds many) never
/// wait for each other.
enum WriteLock {
    private static let locks = Mutex<[String: NSLock]>([:])

    /// The lock of the database at `path` (the same for every spelling of the path).
    static func lock(path: String) -> NSLock {
        let key = URL(fileURLWithPath: path).standardizedFileURL.path
        return locks.withLock { locks in
            if let lock = locks[key] { return lock }
            let lock = NSLock()
            locks[key] = lock
            return lock
        }
    }
}
