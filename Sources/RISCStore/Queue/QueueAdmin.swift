import Foundation
import RISCCore

/// What `risc queue` reads and changes: counts, listings, requeueing dead letters, purging.
public final class QueueAdmin: @unchecked Sendable {
    private let connection: SQLiteConnection
    var connectionForReads: SQLiteConnection { connection }

    public init(directory: String) throws {
        let path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(code: 14, "no store at \(path): has `risc serve` run with this data directory?")
        }
        connection = try SQLiteConnection(path: path)
        try SQLiteEventStore.migrate(connection)
    }

    /// Counts by state; `scheduled` are pending SETs waiting for a retry.
    public func status(now: Double = Date().timeIntervalSince1970) throws -> JSONObject {
        var object = JSONObject()
        for (name, sql) in [
            ("pending", "SELECT count(*) FROM sets WHERE state = 'pending' AND attempts = 0"),
            ("scheduled_retry", "SELECT count(*) FROM sets WHERE state = 'pending' AND attempts > 0"),
            ("done", "SELECT count(*) FROM sets WHERE state = 'done'"),
            ("dead", "SELECT count(*) FROM sets WHERE state = 'dead'"),
        ] {
            object[name] = .number(Double(try connection.scalar(sql) ?? 0))
        }
        let oldest = try connection.prepare("SELECT min(received_at) FROM sets WHERE state = 'pending'")
        if try oldest.step(), !oldest.isNull(0) {
            object["oldest_pending_age_seconds"] = .number((now - oldest.double(0)).rounded())
        }
        oldest.reset()
        return object
    }

    /// SETs in arrival order, optionally of one state.
    public func list(state: String?, limit: Int) throws -> [JSONObject] {
        let statement = try connection.prepare("""
            SELECT id, jti, iss, state, attempts, deliveries, event_types, received_at, next_attempt_at, last_error
            FROM sets WHERE ?1 IS NULL OR state = ?1 ORDER BY id DESC LIMIT ?2
            """)
        try statement.bind([.optional(state), .int(Int64(limit))])
        var rows: [JSONObject] = []
        while try statement.step() {
            var row = JSONObject()
            row["id"] = .number(Double(statement.int(0)))
            row["jti"] = .string(statement.text(1) ?? "")
            row["iss"] = .string(statement.text(2) ?? "")
            row["state"] = .string(statement.text(3) ?? "")
            row["attempts"] = .number(Double(statement.int(4)))
            row["deliveries"] = .number(Double(statement.int(5)))
            row["events"] = (try? JSONParser.parse(statement.text(6) ?? "[]")) ?? []
            row["received_at"] = .string(Timestamp.iso8601(statement.double(7)))
            if statement.text(3) == "pending", statement.int(4) > 0 { row["retry_at"] = .string(Timestamp.iso8601(statement.double(8))) }
            if let error = statement.text(9) { row["last_error"] = .string(error) }
            rows.append(row)
        }
        statement.reset()
        return rows
    }

    /// One SET by `jti` with the actions applied for it.
    public func show(jti: String) throws -> JSONObject? {
        let statement = try connection.prepare("SELECT id FROM sets WHERE jti = ?1 ORDER BY id LIMIT 1")
        try statement.bind([.text(jti)])
        guard try statement.step() else { return nil }
        let id = statement.int(0)
        statement.reset()
        guard var row = try list(state: nil, limit: Int.max).first(where: { $0["id"] == .number(Double(id)) }) else { return nil }
        let actions = try connection.prepare(
            "SELECT event_index, action, result, applied_at FROM applied_actions WHERE set_id = ?1 ORDER BY event_index, applied_at")
        try actions.bind([.int(id)])
        var applied: [JSONValue] = []
        while try actions.step() {
            applied.append([
                "event_index": .number(Double(actions.int(0))), "action": .string(actions.text(1) ?? ""),
                "result": .string(actions.text(2) ?? ""), "applied_at": .string(Timestamp.iso8601(actions.double(3))),
            ])
        }
        actions.reset()
        row["actions"] = .array(applied)
        return row
    }

    /// Puts SETs back in the queue to be tried now: one by `jti`, or every dead letter. Returns how many.
    public func retry(jti: String? = nil) throws -> Int {
        if let jti {
            try connection.prepare(
                "UPDATE sets SET state = 'pending', attempts = 0, next_attempt_at = 0 WHERE jti = ?1 AND state IN ('dead', 'pending')"
            ).run([.text(jti)])
        } else {
            try connection.prepare("UPDATE sets SET state = 'pending', attempts = 0, next_attempt_at = 0 WHERE state = 'dead'").run()
        }
        return Int(connection.changes)
    }

    /// Deletes dead letters received more than `olderThan` seconds ago. Returns how many.
    public func purgeDead(olderThan: Double, now: Double = Date().timeIntervalSince1970) throws -> Int {
        try connection.prepare("DELETE FROM sets WHERE state = 'dead' AND received_at < ?1").run([.double(now - olderThan)])
        return Int(connection.changes)
    }
}
