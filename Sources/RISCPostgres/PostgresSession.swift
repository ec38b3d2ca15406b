import Logging
import PostgresNIO
import RISCCore
public import RISCSQL

/// The shared store's `SQLSession`, over its pool.
public struct PostgresSession: SQLSession {
    let database: PostgresDatabase
    public var requeueAssignments: String { PostgresSchema.requeueAssignments }
    public var lockRows: String { " FOR UPDATE" }
    public var wakeWorkers: String? { "SELECT pg_notify('\(PostgresWorkQueue.channel)', '')" }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        try await Self.values(try await database.client.query(Self.query(sql, binds), logger: database.logger))
    }

    public func transaction(steps: [SQLStep]) async throws -> [[[SQLValue]]] {
        try await database.client.withTransaction(logger: database.logger) { connection in
            var done: [[[SQLValue]]] = []
            for step in steps {
                var rows: [[SQLValue]] = []
                for (sql, binds) in try step(done) {
                    rows += try await Self.values(try await connection.query(Self.query(sql, binds), logger: database.logger))
                }
                done.append(rows)
            }
            return done
        }
    }

    /// The server keeps its own (WAL, checksums).
    public func integrityCheck() async throws -> String? { nil }

    private static func query(_ sql: String, _ binds: [SQLValue]) -> PostgresQuery {
        var bindings = PostgresBindings()
        for value in binds {
            switch value {
            case .null: bindings.appendNull()
            case .int(let value): bindings.append(value)
            case .double(let value): bindings.append(value)
            case .text(let value): bindings.append(value)
            }
        }
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }

    private static func values(_ rows: PostgresRowSequence) async throws -> [[SQLValue]] {
        var result: [[SQLValue]] = []
        for try await row in rows {
            result.append(
                try row.map { cell in
                    guard cell.bytes != nil else { return .null }
                    return switch cell.dataType {
                    case .int2, .int4, .int8: .int(try cell.decode(Int64.self))
                    case .bool: .int(try cell.decode(Bool.self) ? 1 : 0)
                    case .float4, .float8: .double(try cell.decode(Double.self))
                    default: .text(try cell.decode(String.self))
                    }
                })
        }
        return result
    }
}
