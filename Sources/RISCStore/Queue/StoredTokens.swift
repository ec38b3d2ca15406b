import Foundation
import RISCCore

extension QueueAdmin {
    /// Stored compact SETs for `risc replay`: by jti, received since a time, or the dead letters.
    public func tokens(jti: String?, since: Double?, deadOnly: Bool, limit: Int) throws -> [(jti: String, token: String)] {
        let statement = try connectionForReads.prepare("""
            SELECT jti, token FROM sets
            WHERE (?1 IS NULL OR jti = ?1) AND (?2 IS NULL OR received_at >= ?2) AND (?3 = 0 OR state = 'dead')
            ORDER BY id LIMIT ?4
            """)
        try statement.bind([.optional(jti), since.map { .double($0) } ?? .null, .int(deadOnly ? 1 : 0), .int(Int64(limit))])
        var result: [(String, String)] = []
        while try statement.step() { result.append((statement.text(0) ?? "", statement.text(1) ?? "")) }
        statement.reset()
        return result
    }
}
