import Foundation
import RISCCore
public import RISCSQL

/// The embedded store's `SQLSession`: a connection of its own, used a call at a time on
/// `BlockingPool.storage`'s threads (never the cooperative pool); a transaction is `BEGIN
/// IMMEDIATE` under the file's in-process write lock.
public final class SQLiteSession: SQLSession, @unchecked Sendable {  // reason: every use of `connection` is under `lock`
    /// Used under `lock` only (`run`).
    let connection: SQLiteConnection
    private let lock = NSLock()
    public let requeueAssignments = Schema.requeueAssignments
    /// `BEGIN IMMEDIATE` holds the store's one write lock.
    public let lockRows = ""
    /// One process holds an embedded store; its workers look for work on their own.
    public let wakeWorkers: String? = nil

    init(_ database: SQLiteDatabase, _ role: SQLiteDatabase.Role) throws {
        connection = try database.connect(role)
    }

    /// Runs `body` with the connection on a storage thread; with `write`, in an immediate
    /// transaction under the database file's write lock.
    func run<T: Sendable>(write: Bool, _ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await BlockingPool.storage.run { [self] in
            Result {
                try lock.withLock {
                    guard write else { return try body(connection) }
                    return try connection.writeLock.withLock { try connection.immediateTransaction { try body(connection) } }
                }
            }
        }.get()
    }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        try await run(write: false) { try Self.rows($0, sql, binds) }
    }

    public func transaction(steps: [SQLStep]) async throws -> [[[SQLValue]]] {
        try await run(write: true) { connection in
            try steps.reduce(into: []) { done, step in done.append(try step(done).flatMap { try Self.rows(connection, $0.sql, $0.binds) }) }
        }
    }

    public func integrityCheck() async throws -> String? { try await rows("PRAGMA integrity_check", []).first?.first?.text ?? "" }

    /// `$n` read as SQLite's `?n`.
    private static func rows(_ connection: SQLiteConnection, _ sql: String, _ binds: [SQLValue]) throws -> [[SQLValue]] {
        let statement = try connection.cached(sql.replacing(/\$(\d)/) { "?" + $0.1 })
        try statement.bind(binds)
        defer { statement.reset() }
        var rows: [[SQLValue]] = []
        while try statement.step() {
            rows.append(
                (0..<statement.columns).map { column in
                    switch statement.type(column) {
                    case .null: .null
                    case .int: .int(statement.int(column))
                    case .double: .double(statement.double(column))
                    case .text: .optional(statement.text(column))
                    }
                })
        }
        return rows
    }
}
