import Foundation
public import RISCCore
import RISCSQL

/// The embedded store's `RetentionStore`: both steps are one indexed UPDATE or DELETE of at most
/// `batch` rows, each under the store's write lock (so ingest waits at most one short batch).
/// `sets_prunable` finds done SETs by when they were done; `sets_stripped` finds stripped ones
/// by when they were received.
public final class SQLiteRetention: RetentionStore, @unchecked Sendable {  // reason: its connection is used under WriteLock only, by one retention pass at a time
    private let connection: SQLiteConnection

    /// `sets`' columns, and the same list with the stripped ones replaced, for `strip`.
    private let columns: String
    private let strippedColumns: String

    public init(directory: String) throws {
        connection = try SQLiteDatabase(directory: directory).connect(.plain)
        let info = try connection.prepare("SELECT name FROM pragma_table_info('sets') ORDER BY cid")
        var names: [String] = []
        while try info.step() { names.append(info.text(0) ?? "") }
        info.reset()
        let replaced = ["token": "''", "subjects": "'[]'", "remote": "NULL", "pruned_at": "?1"]
        columns = names.joined(separator: ", ")
        strippedColumns = names.map { replaced[$0] ?? $0 }.joined(separator: ", ")
        try connection.execute("CREATE TEMP TABLE IF NOT EXISTS strip_batch AS SELECT * FROM main.sets WHERE 0")
    }

    public func retain(_ policy: RetentionPolicy, now: Double, batch: Int) throws -> RetentionPass {
        guard policy.isOn else { return RetentionPass() }
        var pass = RetentionPass()
        try connection.writeLock.withLock {
            // Deleted and inserted again slim, under the same id, not UPDATEd: SQLite rebalances
            // (and frees) b-tree pages when rows are deleted, never when an UPDATE shrinks a row
            // (nor for a REPLACE, which overwrites in place), and new rows only ever go to the
            // end of the table: stripped in place, the space would stay allocated for good.
            try connection.immediateTransaction {
                try connection.execute("DELETE FROM temp.strip_batch")
                try connection.cached(
                    """
                    INSERT INTO temp.strip_batch SELECT \(strippedColumns) FROM sets
                    WHERE id IN (SELECT id FROM sets INDEXED BY sets_prunable
                                 WHERE state = 'done' AND pruned_at IS NULL AND processed_at < ?2 LIMIT ?3)
                    """
                ).run([.double(now), .double(policy.stripBefore(now: now)), .int(Int64(batch))])
                pass.stripped = Int(connection.changes)
                try connection.cached("DELETE FROM sets WHERE id IN (SELECT id FROM temp.strip_batch)").run()
                try connection.cached("INSERT INTO sets (\(columns)) SELECT \(columns) FROM temp.strip_batch").run()
            }
        }
        try connection.writeLock.withLock {
            try connection.immediateTransaction {
                let cutoff = policy.forgetBefore(now: now)
                let choose = "SELECT id FROM sets INDEXED BY sets_stripped WHERE pruned_at IS NOT NULL AND received_at < ?1 LIMIT ?2"
                try connection.cached("DELETE FROM applied_actions WHERE set_id IN (\(choose))").run([.double(cutoff), .int(Int64(batch))])
                try connection.cached("DELETE FROM sets WHERE id IN (\(choose))").run([.double(cutoff), .int(Int64(batch))])
                pass.forgotten = Int(connection.changes)
            }
        }
        return pass
    }

    /// Bytes in pages that hold data (page count less the free list, after a checkpoint): what
    /// the store costs, since SQLite reuses freed pages before it grows the file.
    public func bytesInUse() throws -> Double {
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let pages = try connection.scalar("PRAGMA page_count") ?? 0
        let free = try connection.scalar("PRAGMA freelist_count") ?? 0
        let size = try connection.scalar("PRAGMA page_size") ?? 0
        return Double((pages - free) * size)
    }
}
