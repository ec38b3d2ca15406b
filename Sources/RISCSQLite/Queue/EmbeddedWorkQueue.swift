import Foundation
public import RISCCore
import RISCSQL
import Synchronization

/// The embedded store's `WorkQueue`, so the embedded store runs the same `QueueWorker` as the
/// shared one. The queue is the `sets` table itself (a restart resumes pending and scheduled
/// work); leases are kept in memory, since one process owns the data directory (its lock): a
/// restart has no live leases to honour, and a worker that stalls past its lease is rescued
/// within the process like a dead receiver's on PostgreSQL.
///
/// Every statement runs on one thread of its own, never on the concurrency pool's few.
public final class EmbeddedWorkQueue: WorkQueue, Sendable {
    /// A claimed row: who holds it, until when, and its `jti` (reported when rescued).
    private struct Lease {
        let owner: String
        let expiresAt: Double
        let jti: String
    }

    private let database: Serialized
    private let leases = Mutex<[Int64: Lease]>([:])

    /// The connection and the applier, used from the queue's one thread only.
    private final class Serialized: @unchecked Sendable {  // reason: touched only on `thread`, which has one thread
        let connection: SQLiteConnection
        let applier: EmbeddedActionApplier
        let thread = BlockingPool(name: "risc.queue", maximumThreads: 1)

        init(connection: SQLiteConnection, applier: EmbeddedActionApplier) {
            self.connection = connection
            self.applier = applier
        }

        func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection, EmbeddedActionApplier) throws -> T) async throws -> T {
            try await thread.run { Result { try body(self.connection, self.applier) } }.get()
        }
    }

    /// Opens the queue on the data directory's store, with the token-fingerprint key
    /// (`accounts.token_key_file`, else the data directory's).
    public convenience init(directory: String, tokenKeyFile: String? = nil) throws {
        try self.init(directory: directory, tokenKey: try AccountStore.loadKey(directory: directory, file: tokenKeyFile))
    }

    /// Opens the queue with a token key already loaded and checked (`SQLiteStore.tokenKey`).
    init(directory: String, tokenKey: [UInt8]) throws {
        let connection = try SQLiteDatabase(directory: directory).connect(.transactions)
        database = Serialized(connection: connection, applier: EmbeddedActionApplier(connection: connection, tokenKey: tokenKey))
        self.tokenKey = tokenKey
    }

    /// The token-fingerprint key the queue matches tokens with (unlink notices are MACed with it).
    public let tokenKey: [UInt8]

    public func claim(owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope) async throws -> [ClaimedSET] {
        // On the queue's one thread, so two claims never race for the same rows.
        try await database.run { connection, _ in
            // Rows another worker holds are skipped: ask for that many more.
            let held = self.leases.withLock { leases in leases.values.count { !QueueTime.hasExpired($0.expiresAt, now: now, horizon: horizon) } }
            // In the queue index's order (due time, then arrival): with a bound LIMIT the planner
            // would otherwise scan the whole table in rowid order, reading every page when nothing is due.
            // Then the rows due beyond the horizon (`QueueTime`): a second range of the same index.
            let due = try connection.cached(
                """
                SELECT * FROM (SELECT id, issuer, jti, token, attempts, coalesce(retry_since, received_at) FROM sets INDEXED BY sets_queue
                               WHERE state = 'pending' AND next_attempt_at <= ?1 AND (?3 OR (issuer = ?4) = ?5) ORDER BY next_attempt_at, id LIMIT ?2)
                UNION ALL
                SELECT * FROM (SELECT id, issuer, jti, token, attempts, coalesce(retry_since, received_at) FROM sets INDEXED BY sets_queue
                               WHERE state = 'pending' AND next_attempt_at > ?6 AND (?3 OR (issuer = ?4) = ?5) ORDER BY next_attempt_at, id LIMIT ?2)
                """)
            try due.bind([
                .double(now), .int(Int64(limit + held)), .int(scope == .all ? 1 : 0), .text(UnlinkNotices.queueIssuer),
                .int(scope == .notices ? 1 : 0), .double(now + horizon),
            ])
            defer { due.reset() }
            var claimed: [ClaimedSET] = []
            while claimed.count < limit, try due.step() {
                let id = due.int(0)
                let taken = self.leases.withLock { leases in
                    if let current = leases[id], !QueueTime.hasExpired(current.expiresAt, now: now, horizon: horizon) { return true }
                    leases[id] = Lease(owner: owner, expiresAt: now + lease, jti: due.text(2) ?? "")
                    return false
                }
                if taken { continue }
                claimed.append(
                    ClaimedSET(
                        id: id, issuer: due.text(1) ?? "", jti: due.text(2) ?? "", token: due.text(3) ?? "", attempts: Int(due.int(4)),
                        owner: owner, leaseExpiresAt: now + lease, retrySince: due.double(5)))
            }
            return claimed
        }
    }

    /// Whether `claim` still holds its lease.
    private func holds(_ claim: ClaimedSET) -> Bool {
        leases.withLock { $0[claim.id]?.owner == claim.owner }
    }

    /// Ends the leases of `claims` that are still theirs.
    private func release(_ claims: [ClaimedSET]) {
        leases.withLock { leases in
            for claim in claims where leases[claim.id]?.owner == claim.owner { leases.removeValue(forKey: claim.id) }
        }
    }

    public func finish(_ items: [FinishItem], applyToAccounts: Bool, now: Double) async throws -> [FinishReport?] {
        guard !items.isEmpty else { return [] }
        let held = items.map { holds($0.claim) }
        let reports = try await database.run { connection, applier -> [FinishReport?] in
            try connection.writeLock.withLock {
                try connection.immediateTransaction {
                    try zip(items, held).map { item, held -> FinishReport? in
                        guard held else { return nil }
                        let claim = item.claim
                        var report = FinishReport()
                        if let claims = item.claims {
                            report.verifications = try VerificationLedger.records(
                                for: item.plan, claims: claims, id: claim.id, jti: claim.jti, compact: claim.token, connection: connection, now: now)
                        }
                        if applyToAccounts {
                            report.outcomes = try applier.apply(item.plan, setID: claim.id, keyIssuer: claim.issuer, now: now)
                        } else if !item.tokens.isEmpty {
                            try applier.markRevoked(item.tokens, now: now)
                        }
                        try connection.cached(
                            "UPDATE sets SET state = 'done', attempts = ?1, processed_at = ?2, last_error = NULL WHERE id = ?3 AND state = 'pending'"
                        ).run([.int(Int64(claim.attempts + 1)), .double(now), .int(claim.id)])
                        return connection.changes == 1 ? report : nil
                    }
                }
            }
        }
        release(items.map(\.claim))
        return reports
    }

    public func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) async throws -> [TokenToRevoke] {
        guard plan.steps.contains(where: { TokenToRevoke.wanted(by: $0) != (false, false) }) else { return [] }
        return try await database.run { _, applier in try applier.tokensToRevoke(plan, keyIssuer: keyIssuer) }
    }

    public func fail(_ claim: ClaimedSET, error: String, retryAt: Double?, now: Double) async throws -> Bool {
        guard holds(claim) else { return false }
        let changed = try await database.run { connection, _ in
            try connection.writeLock.withLock {
                try connection.cached(
                    """
                    UPDATE sets SET attempts = ?1, last_error = ?2, next_attempt_at = ?3, state = ?4 WHERE id = ?5 AND state = 'pending'
                    """
                ).run([
                    .int(Int64(claim.attempts + 1)), .text(error), .double(retryAt ?? now), .text(retryAt == nil ? "dead" : "pending"),
                    .int(claim.id),
                ])
                return connection.changes == 1
            }
        }
        release([claim])
        return changed
    }

    public func rescueExpiredLeases(now: Double, horizon: Double) async throws -> [String] {
        leases.withLock { leases in
            let expired = leases.filter { QueueTime.hasExpired($0.value.expiresAt, now: now, horizon: horizon) }
            for id in expired.keys { leases.removeValue(forKey: id) }
            return expired.sorted { $0.key < $1.key }.map(\.value.jti)
        }
    }
}
