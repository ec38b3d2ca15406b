import Foundation
import Logging
import PostgresNIO
import RISCCore

/// Writes rows read from the embedded store into the shared one (`risc store copy`), keeping
/// their ids so that references (`applied_actions.set_id`, `sessions.account_id`) hold.
public struct PostgresImport: Sendable {
    public let database: PostgresDatabase

    public init(database: PostgresDatabase) { self.database = database }

    /// One value to write; mirrors the embedded store's cells.
    public enum Value: Sendable {
        case null, int(Int64), double(Double), text(String)
    }

    /// Refuses a target that holds SETs or accounts already: a copy goes into an empty store.
    public func checkEmpty() async throws {
        let rows = try await database.client.query(
            "SELECT (SELECT count(*) FROM sets) + (SELECT count(*) FROM accounts) + (SELECT count(*) FROM applied_actions)",
            logger: database.logger)
        for try await count in rows.decode(Int64.self) where count > 0 {
            throw StoreError(.refused, "the target store is not empty (\(count) rows in sets, accounts, applied_actions): copy into a new database")
        }
    }

    /// Records the source's token-key check value (refused if the target has another).
    public func adoptTokenKeyCheck(_ check: String) async throws {
        try await database.client.query(
            "INSERT INTO meta (name, value) VALUES ('token_key_check', \(check)) ON CONFLICT (name) DO NOTHING", logger: database.logger)
        for try await value in try await database.client.query("SELECT value FROM meta WHERE name = 'token_key_check'", logger: database.logger)
            .decode(String.self)
        where !TokenFingerprint.constantTimeEquals(value, check) {
            throw StoreError(.refused, "the target store records another token key than the source's")
        }
    }

    /// Inserts `rows` into `table` in one statement (at most 65535 / columns rows).
    public func insert(_ table: String, columns: [String], rows: [[Value]]) async throws {
        guard !rows.isEmpty else { return }
        var binds = PostgresBindings()
        var tuples: [String] = []
        var n = 0
        for row in rows {
            var placeholders: [String] = []
            for value in row {
                n += 1
                placeholders.append("$\(n)")
                switch value {
                case .null: binds.appendNull()
                case .int(let v): binds.append(v)
                case .double(let v): binds.append(v)
                case .text(let v): binds.append(v)
                }
            }
            tuples.append("(" + placeholders.joined(separator: ", ") + ")")
        }
        let sql = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + tuples.joined(separator: ", ")
        try await database.client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: database.logger)
    }

    /// Moves the id sequences past the copied ids.
    public func resetSequences() async throws {
        for table in ["sets", "accounts", "sessions", "tokens"] {
            try await database.client.query(
                PostgresQuery(unsafeSQL: "SELECT setval(pg_get_serial_sequence('\(table)', 'id'), coalesce((SELECT max(id) FROM \(table)), 0) + 1, false)"),
                logger: database.logger)
        }
    }

    public func count(_ table: String) async throws -> Int {
        for try await count in try await database.client.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: database.logger)
            .decode(Int64.self)
        {
            return Int(count)
        }
        return 0
    }

    /// The same fingerprint of SETs as `StoreExport.sample`.
    public func sample(ids: [Int64]) async throws -> [Int64: String] {
        var result: [Int64: String] = [:]
        let rows = try await database.client.query(
            "SELECT id, jti, state, deliveries, token FROM sets WHERE id = ANY(\(ids))", logger: database.logger)
        for try await (id, jti, state, deliveries, token) in rows.decode((Int64, String, String, Int64, String).self) {
            result[id] = "\(jti) \(state) \(deliveries) \(SHA256.hex(Array(token.utf8)))"
        }
        return result
    }
}
