import Foundation
import RISCCore

/// What the crash drill checks afterwards: for each acknowledged `jti`, that it is stored, done,
/// and that each of its planned actions was applied exactly once; and that the file is sound.
public struct StoreAudit: Sendable {
    public var acknowledged = 0
    public var stored = 0
    public var done = 0
    /// Acknowledged SETs with their actions recorded (once each: the record's key is
    /// (SET, event, action), written in the same transaction as the effect).
    public var applied = 0
    /// Acknowledged SETs with no recorded action.
    public var notApplied = 0
    /// Rows in the store overall (acknowledged or in flight at a kill).
    public var rows = 0
    public var integrity = ""

    public var lost: Int { acknowledged - stored }
    public var passed: Bool {
        lost == 0 && done == acknowledged && applied == acknowledged && integrity == "ok"
    }
}

extension QueueAdmin {
    /// Audits the store against the `jti`s a client saw acknowledged.
    public func audit(acknowledged jtis: [String]) throws -> StoreAudit {
        var audit = StoreAudit()
        audit.acknowledged = jtis.count
        audit.integrity = try {
            let check = try connectionForReads.prepare("PRAGMA integrity_check")
            defer { check.reset() }
            return try check.step() ? check.text(0) ?? "" : ""
        }()
        audit.rows = Int(try connectionForReads.scalar("SELECT count(*) FROM sets") ?? 0)
        // One pass over the table (jti alone is not indexed: the unique key is issuer + jti).
        let rows = try connectionForReads.prepare("""
            SELECT s.jti, s.state, (SELECT count(*) FROM applied_actions a WHERE a.set_id = s.id) FROM sets s
            """)
        var found: [String: (done: Bool, actions: Int64)] = [:]
        while try rows.step() { found[rows.text(0) ?? ""] = (rows.text(1) == "done", rows.int(2)) }
        rows.reset()
        for jti in jtis {
            guard let row = found[jti] else { continue }
            audit.stored += 1
            if row.done { audit.done += 1 }
            if row.actions == 0 { audit.notApplied += 1 } else { audit.applied += 1 }
        }
        return audit
    }
}
