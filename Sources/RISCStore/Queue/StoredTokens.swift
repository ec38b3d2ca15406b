import Foundation
import RISCCore

extension QueueAdmin {
    /// Stored compact SETs for `risc replay`: by jti, received since a time, or the dead letters.
    public func tokens(jti: String?, since: Double?, until: Double? = nil, deadOnly: Bool, limit: Int) throws -> [(jti: String, token: String)] {
        let statement = try connectionForReads.prepare("""
            SELECT jti, token FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 = 0 OR state = 'dead')
              AND (?5 IS NULL OR received_at <= ?5)
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
        try WriteLock.withLock {
            try connectionForReads.execute("BEGIN IMMEDIATE")
            do {
                let reset = try connectionForReads.prepare(
                    "UPDATE sets SET state = 'pending', attempts = 0, next_attempt_at = 0, last_error = NULL, processed_at = NULL WHERE id = ?1")
                let forget = try connectionForReads.prepare("DELETE FROM applied_actions WHERE set_id = ?1")
                for id in ids {
                    try reset.run([.int(id)])
                    try forget.run([.int(id)])
                }
                try connectionForReads.execute("COMMIT")
            } catch {
                try? connectionForReads.execute("ROLLBACK")
                throw error
            }
        }
        return ids
    }

    /// Row ids of stored SETs by jti, received since a time, or the dead letters (as `tokens`).
    public func ids(jti: String?, since: Double?, until: Double? = nil, deadOnly: Bool) throws -> [Int64] {
        let statement = try connectionForReads.prepare("""
            SELECT id FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 = 0 OR state = 'dead')
              AND (?4 IS NULL OR received_at <= ?4)
            ORDER BY id
            """)
        try statement.bind([.optional(jti), since.map { .double($0) } ?? .null, .int(deadOnly ? 1 : 0), until.map { .double($0) } ?? .null])
        var result: [Int64] = []
        while try statement.step() { result.append(statement.int(0)) }
        statement.reset()
        return result
    }

    /// Where each of these SETs stands in the queue, with the actions applied for it.
    public func outcomes(ids: [Int64]) throws -> [JSONObject] {
        let row = try connectionForReads.prepare("SELECT jti, state, attempts, last_error, event_types FROM sets WHERE id = ?1")
        let actions = try connectionForReads.prepare(
            "SELECT action, result FROM applied_actions WHERE set_id = ?1 ORDER BY event_index, applied_at")
        var result: [JSONObject] = []
        for id in ids {
            try row.bind([.int(id)])
            guard try row.step() else {
                row.reset()
                continue
            }
            var object = JSONObject()
            object["jti"] = .string(row.text(0) ?? "")
            let state = row.text(1) ?? ""
            object["state"] = .string(state == "pending" && row.int(2) > 0 ? "retrying" : state)
            let types = (try? JSONParser.parse(row.text(4) ?? "[]"))?.arrayValue ?? []
            object["events"] = .array(types.map { .string($0.stringValue.flatMap(EventType.init(name:))?.shortName ?? $0.stringValue ?? "") })
            if let error = row.text(3) { object["error"] = .string(error) }
            row.reset()
            try actions.bind([.int(id)])
            var applied: [JSONValue] = []
            while try actions.step() {
                applied.append(["action": .string(actions.text(0) ?? ""), "result": .string(actions.text(1) ?? "")])
            }
            actions.reset()
            object["actions"] = .array(applied)
            result.append(object)
        }
        return result
    }
}
