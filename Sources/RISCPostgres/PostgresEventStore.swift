import Foundation
import Logging
import PostgresNIO
import RISCCore
import Synchronization

/// The shared store's `EventStore`: several receivers append to one PostgreSQL database.
///
/// Group commit: appends that arrive while a transaction is in flight wait for the next one, and
/// each transaction stores its whole batch with one multi-row
/// `INSERT … SELECT FROM unnest(…) ON CONFLICT (issuer, jti) DO NOTHING`. `append` returns once
/// COMMIT has returned, which with `synchronous_commit` on (checked at start) means the WAL is on
/// disk. A SET already stored, by this receiver or another, even one committing at the same
/// instant (the unique index makes the second insert wait for the first), is counted in
/// `deliveries` and reported as a duplicate.
public final class PostgresEventStore: EventStore, Sendable {
    public let database: PostgresDatabase
    public let maxBatch: Int
    private typealias Waiting = (record: SETRecord, continuation: CheckedContinuation<AppendOutcome, any Error>)
    private let state = Mutex<(waiting: [Waiting], committing: Bool)>(([], false))
    /// Transactions committed and rows sent, for metrics.
    private let counts = Mutex<(commits: Int, rows: Int)>((0, 0))

    /// Called after each commit (this receiver's worker wakes without waiting for the notification).
    public let afterCommit = Mutex<(@Sendable () -> Void)?>(nil)

    /// Seconds a batch may take to commit before its requests are answered 503.
    public let commitDeadline: Double

    public init(database: PostgresDatabase, maxBatch: Int = 512, commitDeadline: Double = 5) {
        self.database = database
        self.maxBatch = maxBatch
        self.commitDeadline = commitDeadline
    }

    public var writeCounts: (commits: Int, rows: Int) { counts.withLock { $0 } }

    /// Stores `record` (see the type's comment); gives up after `commitDeadline` counted from now,
    /// queueing included, so a request never waits longer than that for its answer.
    public func append(_ record: SETRecord) async throws -> AppendOutcome {
        try await withDeadline(commitDeadline, "storing a SET") { try await self.enqueue(record) }
    }

    private func enqueue(_ record: SETRecord) async throws -> AppendOutcome {
        try await withCheckedThrowingContinuation { continuation in
            let start = state.withLock { state -> Bool in
                state.waiting.append((record, continuation))
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            if start { Task { await commitWhileWaiting() } }
        }
    }

    /// Commits batches until nobody waits.
    private func commitWhileWaiting() async {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                guard !state.waiting.isEmpty else {
                    state.committing = false
                    return []
                }
                let batch = Array(state.waiting.prefix(maxBatch))
                state.waiting.removeFirst(batch.count)
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                let records = batch.map(\.record)
                // A SET not acknowledged within the deadline gets 503 and Google retries it; if the
                // COMMIT did land meanwhile, the retry is a duplicate, answered 202.
                let outcomes = try await withDeadline(commitDeadline, "storing \(records.count) SET(s)") { try await self.commit(records) }
                for (waiting, outcome) in zip(batch, outcomes) { waiting.continuation.resume(returning: outcome) }
            } catch {
                for waiting in batch { waiting.continuation.resume(throwing: error) }
            }
        }
    }

    /// One transaction for the batch; the outcomes in the batch's order.
    func commit(_ records: [SETRecord]) async throws -> [AppendOutcome] {
        let logger = database.logger
        let outcomes = try await database.client.withTransaction(logger: logger) { connection -> [AppendOutcome] in
            let issuers = records.map(\.issuer), jtis = records.map(\.tokenID), claimed = records.map(\.claimedIssuer)
            let issued = records.map(\.issuedAt), received = records.map(\.receivedAt)
            let remotes = records.map { $0.remoteAddress ?? "" }, types = records.map { $0.contentType ?? "" }
            let events = records.map { JSONValue.array($0.eventTypes.map { .string($0) }).serialized }
            let subjects = records.map(\.subjectsJSON), tokens = records.map(\.token)
            let inserted = try await connection.query("""
                INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, remote, content_type, event_types, subjects, token)
                SELECT i, j, s, a, r, r, NULLIF(rm, ''), NULLIF(ct, ''), e, sb, tk
                FROM unnest(\(issuers)::text[], \(jtis)::text[], \(claimed)::text[], \(issued)::float8[], \(received)::float8[],
                            \(remotes)::text[], \(types)::text[], \(events)::text[], \(subjects)::text[], \(tokens)::text[])
                     AS t(i, j, s, a, r, rm, ct, e, sb, tk)
                ON CONFLICT (issuer, jti) DO NOTHING
                RETURNING id, issuer, jti
                """, logger: logger)
            var ids: [String: Int64] = [:]
            for try await (id, issuer, jti) in inserted.decode((Int64, String, String).self) { ids[Self.key(issuer, jti)] = id }
            // Idle workers on every receiver wake at COMMIT (a hint only: they poll anyway).
            if !ids.isEmpty { try await connection.query("SELECT pg_notify(\(PostgresWorkQueue.channel), '')", logger: logger) }
            var outcomes: [AppendOutcome] = []
            for record in records {
                let key = Self.key(record.issuer, record.tokenID)
                if let id = ids.removeValue(forKey: key) {
                    outcomes.append(.accepted(id: id))  // the first of the batch with this (issuer, jti)
                    continue
                }
                let counted = try await connection.query("""
                    UPDATE sets SET deliveries = deliveries + 1, last_received_at = greatest(last_received_at, \(record.receivedAt))
                    WHERE issuer = \(record.issuer) AND jti = \(record.tokenID) RETURNING id, deliveries
                    """, logger: logger)
                var outcome: AppendOutcome?
                for try await (id, deliveries) in counted.decode((Int64, Int64).self) { outcome = .duplicate(id: id, deliveries: deliveries) }
                guard let outcome else { throw PostgresDatabase.NotDurable(description: "a duplicate SET vanished from the store") }
                outcomes.append(outcome)
            }
            return outcomes
        }
        counts.withLock {
            $0.commits += 1
            $0.rows += records.count
        }
        afterCommit.withLock { $0 }?()
        return outcomes
    }

    private static func key(_ issuer: String, _ jti: String) -> String { issuer + "\u{0}" + jti }
}
