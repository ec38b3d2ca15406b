import Foundation
import RISCCore

/// The embedded store's `RetentionStore`: both steps are one indexed UPDATE or DELETE of at most
/// `batch` rows, each under the store's write lock (so ingest waits at most one short batch).
/// `sets_prunable` finds done SETs by when they were done; `sets_stripped` finds stripped ones
/// by when they were received.
public final class SQLiteRetention: RetentionStore, @unchecked Sendable {
    private let connection: SQLiteConnection

    public init(directory: String) throws {
        connection = try SQLiteConnection(path: (directory as NSString).appendingPathComponent("risc.sqlite3"))
        try SQLiteEventStore.migrate(connection)
    }

    public func retain(_ policy: RetentionPolicy, now: Double, batch: Int) throws -> RetentionPass {
        guard policy.isOn else { return RetentionPass() }
        var pass = RetentionPass()
        try WriteLock.withLock {
            try connection.cached("""
                UPDATE sets SET token = '', subjects = '[]', remote = NULL, pruned_at = ?1
                WHERE id IN (SELECT id FROM sets INDEXED BY sets_prunable
                             WHERE state = 'done' AND pruned_at IS NULL AND processed_at < ?2 LIMIT ?3)
                """).run([.double(now), .double(policy.stripBefore(now: now)), .int(Int64(batch))])
            pass.stripped = Int(connection.changes)
        }
        try WriteLock.withLock {
            try connection.execute("BEGIN IMMEDIATE")
            do {
                let cutoff = policy.forgetBefore(now: now)
                let choose = "SELECT id FROM sets INDEXED BY sets_stripped WHERE pruned_at IS NOT NULL AND received_at < ?1 LIMIT ?2"
                try connection.cached("DELETE FROM applied_actions WHERE set_id IN (\(choose))").run([.double(cutoff), .int(Int64(batch))])
                try connection.cached("DELETE FROM sets WHERE id IN (\(choose))").run([.double(cutoff), .int(Int64(batch))])
                pass.forgotten = Int(connection.changes)
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
        return pass
    }
}
