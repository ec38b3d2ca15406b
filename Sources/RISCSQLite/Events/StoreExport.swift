import Foundation
import RISCCore
import RISCSQL

/// One value of a row read for export, as SQLite holds it.
public enum StoreCell: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
}

/// Reads the embedded store table by table, for `risc store copy` (moving it into PostgreSQL).
/// Only the tables and columns the shared store has too, under the same names.
public final class StoreExport: @unchecked Sendable {  // reason: `risc store copy`'s, read from one task at a time
    private let connection: SQLiteConnection

    /// The tables copied, in an order that respects references, with their columns.
    public static let tables: [(name: String, columns: [String])] = [
        (
            "accounts",
            [
                "id", "issuer", "subject", "user_id", "email", "google_signin_enabled", "email_recovery_enabled", "flagged_for_review",
                "heightened_monitoring", "access_changed_at", "verification_state", "created_at", "updated_at",
            ]
        ),
        ("sessions", ["id", "account_id", "session_id", "via_google", "created_at", "ended_at", "ended_reason"]),
        ("tokens", ["id", "account_id", "kind", "hash", "hash_of_hex", "prefix_mac", "label", "created_at", "revoked_at", "revoked_reason"]),
        (
            "sets",
            [
                "id", "issuer", "jti", "iss", "iat", "received_at", "last_received_at", "deliveries", "remote", "content_type", "event_types",
                "subjects", "token", "state", "attempts", "next_attempt_at", "last_error", "processed_at", "pruned_at",
            ]
        ),
        ("applied_actions", ["set_id", "event_index", "action", "applied_at", "result"]),
        ("stream_verifications", ["state", "requested_at", "api_base", "matched_at", "set_id", "jti", "kid", "alg", "iss", "aud"]),
    ]

    public init(directory: String) throws {
        connection = try SQLiteDatabase(directory: directory, mustExist: true).connect(.plain)
    }

    public func count(_ table: String) throws -> Int {
        guard Self.tables.contains(where: { $0.name == table }) else { return 0 }
        return Int(try connection.scalar("SELECT count(*) FROM \(table)") ?? 0)
    }

    /// Up to `limit` rows of `table` after `rowid` (0 to start), with the last rowid read.
    public func rows(_ table: String, after rowid: Int64, limit: Int) throws -> (rows: [[StoreCell]], last: Int64) {
        guard let columns = Self.tables.first(where: { $0.name == table })?.columns else { return ([], rowid) }
        let statement = try connection.prepare(
            "SELECT rowid, \(columns.joined(separator: ", ")) FROM \(table) WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")
        try statement.bind([.int(rowid), .int(Int64(limit))])
        defer { statement.reset() }
        var rows: [[StoreCell]] = []
        var last = rowid
        while try statement.step() {
            last = statement.int(0)
            rows.append(
                (1...Int32(columns.count)).map { index in
                    switch statement.type(index) {
                    case .null: .null
                    case .int: .int(statement.int(index))
                    case .double: .double(statement.double(index))
                    case .text: .text(statement.text(index) ?? "")
                    }
                })
        }
        return (rows, last)
    }

    /// These SETs' (jti, state, deliveries, SHA-256 of the token), for the copy's sample check.
    public func sample(ids: [Int64]) throws -> [Int64: String] {
        let statement = try connection.prepare("SELECT jti, state, deliveries, token FROM sets WHERE id = ?1")
        var result: [Int64: String] = [:]
        for id in ids {
            try statement.bind([.int(id)])
            if try statement.step() {
                result[id] = "\(statement.text(0) ?? "") \(statement.text(1) ?? "") \(statement.int(2)) \(SHA256.hex(Array((statement.text(3) ?? "").utf8)))"
            }
            statement.reset()
        }
        return result
    }

    /// The largest SET id, for sampling.
    public func maxSETID() throws -> Int64 { try connection.scalar("SELECT coalesce(max(id), 0) FROM sets") ?? 0 }

    /// The token key's check value the store recorded, if any.
    public func tokenKeyCheck() throws -> String? { try AccountStore.tokenKeyCheck(connection) }
}
