import Foundation
public import RISCCore

/// The embedded store's `QueueAdministration`: what `risc queue` and `risc replay` read and change.
public final class QueueAdmin: QueueAdministration, @unchecked Sendable {  // reason: a command's, called from one task at a time (the server never opens one)
    private let connection: SQLiteConnection
    var connectionForReads: SQLiteConnection { connection }

    public init(directory: String) throws {
        connection = try SQLiteDatabase(directory: directory, mustExist: true).connect(.plain)
    }

    public func counts(now: Double = systemNow()) throws -> QueueCounts {
        let statement = try connection.prepare("SELECT state, attempts > 0, count(*), min(received_at) FROM sets GROUP BY state, attempts > 0")
        var groups: [(state: String, retried: Bool, count: Int, firstReceived: Double?)] = []
        while try statement.step() { groups.append((statement.text(0) ?? "", statement.int(1) != 0, Int(statement.int(2)), statement.double(3))) }
        statement.reset()
        var counts = QueueCounts(groups: groups, now: now)
        counts.lastRetryError = try failure(QueueCounts.lastRetryErrorSQL)
        counts.lastDeadError = try failure(QueueCounts.lastDeadErrorSQL)
        return counts
    }

    private func failure(_ sql: String) throws -> (jti: String, error: String)? {
        let statement = try connection.prepare(sql)
        defer { statement.reset() }
        return try statement.step() ? (statement.text(0) ?? "", statement.text(1) ?? "") : nil
    }

    /// The columns `row(from:)` reads, in its order.
    static let rowColumns = "id, jti, iss, state, attempts, deliveries, event_types, received_at, next_attempt_at, last_error"

    static func row(from statement: SQLiteStatement) -> QueueRow {
        QueueRow(
            id: statement.int(0), jti: statement.text(1) ?? "", issuer: statement.text(2) ?? "", stateText: statement.text(3) ?? "",
            attempts: Int(statement.int(4)), deliveries: Int(statement.int(5)), eventTypesJSON: statement.text(6) ?? "[]",
            receivedAt: statement.double(7), nextAttemptAt: statement.double(8), lastError: statement.text(9))
    }

    public func list(state: QueueState?, limit: Int) throws -> [QueueRow] {
        let statement = try connection.prepare(
            "SELECT \(Self.rowColumns) FROM sets WHERE ?1 IS NULL OR state = ?1 ORDER BY id DESC LIMIT ?2")
        try statement.bind([.optional(state?.rawValue), .int(Int64(min(limit, Int(Int64.max))))])
        var rows: [QueueRow] = []
        while try statement.step() { rows.append(Self.row(from: statement)) }
        statement.reset()
        return rows
    }

    public func show(jti: String) throws -> QueueRow? {
        let statement = try connection.prepare("SELECT id FROM sets WHERE jti = ?1 ORDER BY id LIMIT 1")
        try statement.bind([.text(jti)])
        guard try statement.step() else { return nil }
        let id = statement.int(0)
        statement.reset()
        return try rows(ids: [id]).first
    }

    public func rows(ids: [Int64]) throws -> [QueueRow] {
        let row = try connection.prepare("SELECT \(Self.rowColumns) FROM sets WHERE id = ?1")
        let actions = try connection.prepare(
            "SELECT event_index, action, result, applied_at FROM applied_actions WHERE set_id = ?1 ORDER BY event_index, applied_at")
        var result: [QueueRow] = []
        for id in ids {
            try row.bind([.int(id)])
            guard try row.step() else {
                row.reset()
                continue
            }
            var found = Self.row(from: row)
            row.reset()
            try actions.bind([.int(id)])
            var applied: [AppliedAction] = []
            while try actions.step() {
                applied.append(
                    AppliedAction(
                        eventIndex: Int(actions.int(0)), action: actions.text(1) ?? "", result: actions.text(2) ?? "",
                        appliedAt: actions.double(3)))
            }
            actions.reset()
            found.actions = applied
            result.append(found)
        }
        return result
    }

    public func retry(jti: String? = nil) throws -> Int {
        if let jti {
            try connection.prepare(
                "UPDATE sets SET \(Schema.requeueAssignments) WHERE jti = ?1 AND state IN ('dead', 'pending')"
            ).run([.text(jti)])
        } else {
            try connection.prepare("UPDATE sets SET \(Schema.requeueAssignments) WHERE state = 'dead'").run()
        }
        return Int(connection.changes)
    }

    public func purgeDead(olderThan: Double, now: Double = systemNow()) throws -> Int {
        return try connection.immediateTransaction {
            let chosen = "SELECT id FROM sets WHERE state = 'dead' AND received_at < ?1"
            try connection.prepare("DELETE FROM applied_actions WHERE set_id IN (\(chosen))").run([.double(now - olderThan)])
            try connection.prepare("DELETE FROM sets WHERE id IN (\(chosen))").run([.double(now - olderThan)])
            return Int(connection.changes)
        }
    }
}
