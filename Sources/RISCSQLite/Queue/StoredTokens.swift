import Foundation
public import RISCCore

extension QueueAdmin {
    public func tokens(_ selection: StoredSETSelection) throws -> [(id: Int64, jti: String, token: String)] {
        let statement = try selecting("id, jti, token", selection, limit: Int64(selection.limit), after: selection.after)
        var result: [(Int64, String, String)] = []
        while try statement.step() { result.append((statement.int(0), statement.text(1) ?? "", statement.text(2) ?? "")) }
        statement.reset()
        return result
    }

    public func ids(_ selection: StoredSETSelection) throws -> [Int64] {
        let statement = try selecting("id", selection, limit: -1)  // -1: no limit
        var result: [Int64] = []
        while try statement.step() { result.append(statement.int(0)) }
        statement.reset()
        return result
    }

    /// `columns` of the chosen stored SETs, in arrival order, at most `limit`.
    private func selecting(_ columns: String, _ selection: StoredSETSelection, limit: Int64, after: Int64 = 0) throws -> SQLiteStatement {
        let statement = try connectionForReads.prepare(
            """
            SELECT \(columns) FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 IS NULL OR received_at <= ?3)
              AND (?4 = 0 OR state = 'dead') AND pruned_at IS NULL AND id > ?6
            ORDER BY id LIMIT ?5
            """)
        try statement.bind([
            .optional(selection.jti), selection.since.map { .double($0) } ?? .null, selection.until.map { .double($0) } ?? .null,
            .int(selection.deadOnly ? 1 : 0), .int(limit), .int(after),
        ])
        return statement
    }
}

extension QueueAdmin {
    /// Puts the chosen stored SETs back in the queue as if they had just arrived, for
    /// `risc replay --local`: pending, no attempts, and the record of what was applied for them
    /// forgotten, so the worker runs their actions again (the ordering rule still holds, so an old
    /// event never undoes a newer one). Returns their row ids, in arrival order.
    public func requeue(ids: [Int64]) throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        try connectionForReads.writeLock.withLock {
            try connectionForReads.immediateTransaction {
                let reset = try connectionForReads.prepare(
                    "UPDATE sets SET \(Schema.requeueAssignments), last_error = NULL, processed_at = NULL WHERE id = ?1")
                let forget = try connectionForReads.prepare("DELETE FROM applied_actions WHERE set_id = ?1")
                for id in ids {
                    try reset.run([.int(id)])
                    try forget.run([.int(id)])
                }
            }
        }
        return ids
    }
}
