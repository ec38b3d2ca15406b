import Foundation
import RISCCore
public import RISCSQL

/// The embedded store's `SQLSession`: a connection of its own, used a call at a time; a
/// transaction is `BEGIN IMMEDIATE` under the file's in-process write lock.
public final class SQLiteSession: SQLSession, @unchecked Sendable {  // reason: every use of `connection` is under `lock`
    private let connection: SQLiteConnection
    private let lock = NSLock()
    public let requeueAssignments = Schema.requeueAssignments

    init(_ database: SQLiteDatabase, _ role: SQLiteDatabase.Role) throws {
        connection = try database.connect(role)
    }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        try lock.withLock { try run(sql, binds) }
    }

    public func transaction(_ statements: [(sql: String, binds: [SQLValue])]) async throws -> [[[SQLValue]]] {
        try lock.withLock {
            try connection.writeLock.withLock { try connection.immediateTransaction { try statements.map { try run($0.sql, $0.binds) } } }
        }
    }

    public func integrityCheck() async throws -> String? { try await rows("PRAGMA integrity_check", []).first?.first?.text ?? "" }

    /// `$n` read as SQLite's `?n`.
    private func run(_ sql: String, _ binds: [SQLValue]) throws -> [[SQLValue]] {
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
