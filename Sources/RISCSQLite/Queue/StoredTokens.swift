import Foundation
public import RISCCore

extension QueueAdmin {
    public func tokens(_ selection: StoredSETSelection) throws -> [(jti: String, token: String)] {
        let (jti, since, until, deadOnly, limit) = (selection.jti, selection.since, selection.until, selection.deadOnly, selection.limit)
        let statement = try connectionForReads.prepare(
            """
            SELECT jti, token FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 = 0 OR state = 'dead')
              AND (?5 IS NULL OR received_at <= ?5) AND pruned_at IS NULL
            ORDER BY id LIMIT ?4
            """)
        try statement.bind([
            .optional(jti), since.map { .double($0) } ?? .null, .int(deadOnly ? 1 : 0), .int(Int64(limit)), until.map { .double($0) } ?? .null,
        ])
        var result: [(String, String)] = []
        while try statement.step() { result.append((statement.text(0) ?? "", statement.text(1) ?? "")) }
        statement.reset()
        return result
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

    public func ids(_ selection: StoredSETSelection) throws -> [Int64] {
        let (jti, since, until, deadOnly) = (selection.jti, selection.since, selection.until, selection.deadOnly)
        let statement = try connectionForReads.prepare(
            """
            SELECT id FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 = 0 OR state = 'dead')
              AND (?4 IS NULL OR received_at <= ?4) AND pruned_at IS NULL
            ORDER BY id
            """)
        try statement.bind([.optional(jti), since.map { .double($0) } ?? .null, .int(deadOnly ? 1 : 0), until.map { .double($0) } ?? .null])
        var result: [Int64] = []
        while try statement.step() { result.append(statement.int(0)) }
        statement.reset()
        return result
    }
}
