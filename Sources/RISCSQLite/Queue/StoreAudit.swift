import Foundation
public import RISCCore

extension QueueAdmin {
    /// Audits the store against the `jti`s a client saw acknowledged.
    public func audit(acknowledged jtis: [String]) throws -> StoreAudit {
        var audit = StoreAudit()
        audit.integrity = try {
            let check = try connectionForReads.prepare("PRAGMA integrity_check")
            defer { check.reset() }
            return try check.step() ? check.text(0) ?? "" : ""
        }()
        audit.rows = Int(try connectionForReads.scalar("SELECT count(*) FROM sets") ?? 0)
        // One pass over the table (jti alone is not indexed: the unique key is issuer + jti).
        let rows = try connectionForReads.prepare(
            """
            SELECT s.jti, s.state, (SELECT count(*) FROM applied_actions a WHERE a.set_id = s.id) FROM sets s
            """)
        var found: [String: (done: Bool, actions: Int64)] = [:]
        while try rows.step() { found[rows.text(0) ?? ""] = (rows.text(1) == "done", rows.int(2)) }
        rows.reset()
        audit.count(jtis, found: found)
        return audit
    }
}
