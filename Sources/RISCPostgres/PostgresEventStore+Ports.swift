import Foundation
import PostgresNIO
public import RISCCore

extension PostgresEventStore: RetentionStore {
    /// `RetentionPolicy` on PostgreSQL: an UPDATE strips (MVCC: autovacuum reclaims the old
    /// versions' space for reuse), a DELETE forgets, each step at most `batch` rows in its own
    /// transaction, `SKIP LOCKED` so that receivers running passes at once share the work.
    public func retain(_ policy: RetentionPolicy, now: Double, batch: Int) async throws -> RetentionPass {
        guard policy.isOn else { return RetentionPass() }
        let logger = database.logger
        var pass = RetentionPass()
        let stripBefore = policy.stripBefore(now: now), forgetBefore = policy.forgetBefore(now: now)
        let limit = Int64(batch)
        let stripped = try await database.client.query(
            """
            UPDATE sets SET token = '', subjects = '[]', remote = NULL, pruned_at = \(now)
            WHERE id IN (SELECT id FROM sets WHERE state = 'done' AND pruned_at IS NULL AND processed_at < \(stripBefore)
                         LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING id
            """, logger: logger)
        for try await _ in stripped.decode(Int64.self) { pass.stripped += 1 }
        pass.forgotten = try await database.client.withTransaction(logger: logger) { connection in
            let gone = try await connection.query(
                """
                DELETE FROM sets WHERE id IN (SELECT id FROM sets WHERE pruned_at IS NOT NULL AND received_at < \(forgetBefore)
                                              LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING id
                """, logger: logger)
            var ids: [Int64] = []
            for try await id in gone.decode(Int64.self) { ids.append(id) }
            if !ids.isEmpty { try await connection.query("DELETE FROM applied_actions WHERE set_id = ANY(\(ids))", logger: logger) }
            return ids.count
        }
        return pass
    }
}

extension PostgresEventStore {
    /// The space the SETs and their applied actions take once compacted (`VACUUM FULL`: what a
    /// table that reuses its freed space settles at), in bytes, indexes included. Rewrites both
    /// tables under an exclusive lock: for benchmarks, not for a store in service.
    public func compactedBytes() async throws -> Double {
        try await database.client.query(PostgresQuery(unsafeSQL: "VACUUM FULL sets, applied_actions"), logger: database.logger)
        let rows = try await database.client.query(
            "SELECT (pg_total_relation_size('sets') + pg_total_relation_size('applied_actions'))::float8", logger: database.logger)
        for try await bytes in rows.decode(Double.self) { return bytes }
        return 0
    }
}

extension PostgresEventStore: StoreHealth {
    /// Whether the server answers and takes a write transaction within 2 s (`/readyz`).
    public func isWritable() async -> Bool { await writability(within: 2).writable }

    /// As `isWritable`, with the server's error, or the timeout, when it does not.
    public func writability(within seconds: Double) async -> (writable: Bool, reason: String?) {
        let database = self.database
        do {
            // Unstructured (`withDeadline`): a queued connection request that ignores cancellation
            // does not hold the answer past the deadline.
            try await withDeadline(seconds, "write check", clock: clock) {
                // One statement in its own transaction: assigning a transaction id makes its
                // COMMIT a write, flushed to the WAL (BEGIN and COMMIT around it took two round
                // trips more each second).
                _ = try await database.client.query("SELECT txid_current()", logger: database.logger)
            }
            database.noteSuccess()
            return (true, nil)
        } catch {
            // The cause, from a connection of our own; if the server answers it while the pool is
            // waiting out its backoff, the next check runs on a new pool (`diagnose`). Within the
            // same bound: a server that drops packets holds a connection attempt 5 s.
            let verdict = try? await withDeadline(seconds, "finding the cause", clock: clock) { await database.diagnose(error).description }
            return (false, verdict ?? "PostgreSQL did not take a write within \(String(format: "%g", seconds)) s, nor a connection")
        }
    }

    /// Each health question's SQL, asked alone (`queueDepth`, …) or together (`figures`).
    private enum HealthSQL {
        static let depth = "SELECT count(*) FROM sets WHERE state = 'pending'"
        static let retrying = "SELECT count(*) FROM sets WHERE state = 'pending' AND attempts > 0"
        static let dead = "SELECT count(*) FROM sets WHERE state = 'dead'"
        static let oldest = "SELECT min(received_at) FROM sets WHERE state = 'pending'"
        static let last = "SELECT max(last_received_at) FROM sets"
    }

    public func queueDepth() async throws -> Int { try await count(HealthSQL.depth) }
    public func deadLetters() async throws -> Int { try await count(HealthSQL.dead) }
    public func retrying() async throws -> Int { try await count(HealthSQL.retrying) }
    public func oldestPendingReceivedAt() async throws -> Double? { try await optionalDouble(HealthSQL.oldest) }
    public func lastReceivedAt() async throws -> Double? { try await optionalDouble(HealthSQL.last) }

    /// The figures in one statement, on one connection: five questions at once took five of the
    /// pool's connections each second while the committer held another (and opened new ones,
    /// whose first statements plan with cold caches, under load).
    public func figures(queueCounts: Bool, deadLetters: Bool) async throws -> StoreFigures {
        func asked(_ sql: String, _ ask: Bool) -> String { ask ? "(\(sql))" : "NULL::int8" }
        let sql = """
            SELECT \(asked(HealthSQL.depth, queueCounts)), \(asked(HealthSQL.retrying, queueCounts)), \(asked(HealthSQL.dead, deadLetters)),
                   (\(HealthSQL.oldest)), (\(HealthSQL.last))
            """
        let database = self.database
        return try await withDeadline(2, "health", clock: database.clock) {
            let rows = try await database.client.query(PostgresQuery(unsafeSQL: sql), logger: database.logger)
            for try await (depth, retrying, dead, oldest, last) in rows.decode((Int64?, Int64?, Int64?, Double?, Double?).self) {
                return StoreFigures(
                    queueDepth: depth.map(Int.init), deadLetters: dead.map(Int.init), retrying: retrying.map(Int.init),
                    oldestPendingReceivedAt: .some(oldest), lastReceivedAt: .some(last))
            }
            throw StoreError(.failed, "PostgreSQL answered the health figures with no row")
        }
    }

    // Health reads give up after 2 s: `/readyz` and `/metrics` answer while the server is away.
    private func count(_ sql: String) async throws -> Int {
        let database = self.database
        return try await withDeadline(2, "health", clock: database.clock) {
            let rows = try await database.client.query(PostgresQuery(unsafeSQL: sql), logger: database.logger)
            for try await value in rows.decode(Int64.self) { return Int(value) }
            return 0
        }
    }

    private func optionalDouble(_ sql: String) async throws -> Double? {
        let database = self.database
        return try await withDeadline(2, "health", clock: database.clock) {
            let rows = try await database.client.query(PostgresQuery(unsafeSQL: sql), logger: database.logger)
            for try await value in rows.decode(Double?.self) { return value }
            return nil
        }
    }
}
