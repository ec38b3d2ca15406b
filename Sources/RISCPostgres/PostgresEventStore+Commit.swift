import Foundation
import Logging
import PostgresNIO
import RISCCore
import Synchronization

/// How a batch is stored: the one-statement path, or a transaction applying each SET's actions.
extension PostgresEventStore {
    /// One SET's outcome and the event-log lines of what was done with it in the same transaction.
    typealias Appended = (outcome: AppendOutcome, followUp: [EventLogRecord])

    /// Stores the batch; the outcomes (and inline actions' event-log lines) in the batch's order.
    ///
    /// Most batches take one statement and one round trip to acknowledge: when no SET in it is
    /// about an account the store holds (or its actions go to a webhook), the SETs, their
    /// `applied_actions` rows and the wake-up notification are written by one statement in its
    /// own transaction. Otherwise the batch is a transaction in which each SET's actions are
    /// applied (see `applyInTransaction`). `committed`: whether the COMMIT is known done (else
    /// the next query on `connection` confirms it: `commitBatches`).
    func commit(
        _ records: [SETRecord], on connection: PostgresConnection
    ) async throws -> (results: [Appended], committed: Bool) {
        let inline = self.inline.withLock { $0 }
        let now = wallClock()
        let results: [Appended], queued: Int, committed: Bool
        if let inline {
            let plans = records.map { ActionPlan.plan(for: $0.claims, table: inline.table, now: now) }
            if let fast = try await storeWithoutAccounts(records, plans: plans, now: now, on: connection) {
                (results, queued, committed) = (fast.results, 0, fast.committed)
            } else {
                do {
                    (results, queued) = try await applyInTransaction(
                        records, plans: plans, tokenKey: inline.tokenKey, guarded: false, now: now, on: connection)
                } catch let error as PostgresTransactionError where error.closureError is InlineActions.Unguarded {
                    (results, queued) = try await applyInTransaction(
                        records, plans: plans, tokenKey: inline.tokenKey, guarded: true, now: now, on: connection)
                }
                committed = true
            }
        } else {
            // Actions go to a webhook: stored pending, for the workers. Without plans there is no
            // account to look for, so the statement never stops.
            guard let stored = try await storeWithoutAccounts(records, plans: nil, now: now, on: connection) else {
                preconditionFailure("the one-statement path stopped without accounts to look for")
            }
            (results, committed) = stored
            queued = results.filter { if case .accepted = $0.outcome { true } else { false } }.count
        }
        let offLoop = !connection.eventLoop.inEventLoop
        counts.withLock {
            $0.commits += 1
            $0.rows += records.count
            if offLoop { $0.offLoop += 1 }
        }
        database.noteSuccess()
        if queued > 0 { afterCommit.withLock { $0 }?() }
        return (results, committed)
    }

    /// The one-statement path. With `plans` (inline actions), only if none of the batch's
    /// subjects is an account of the store's and nothing needs a lookup or a ledger update
    /// (token subjects, verification events): then every action's result is known without the
    /// database (`accountFree`, or `unknownSubject`), and the SETs are stored done with their
    /// `applied_actions`. The statement checks for such accounts itself and stores nothing if it
    /// finds one; nil then (and without trying, for a batch that needs lookups). `committed`:
    /// whether a query ran after the statement's own COMMIT (counting redeliveries).
    private func storeWithoutAccounts(
        _ records: [SETRecord], plans: [ActionPlan]?, now: Double, on connection: PostgresConnection
    ) async throws -> (results: [Appended], committed: Bool)? {
        var scopes: [String] = [], subjects: [String] = [], emails: [String] = []
        var applied: [(issuer: String, jti: String, event: Int, action: String, result: String)] = []
        var applies: [Int: (plan: ActionPlan, outcomes: [ActionOutcome])] = [:]
        if let plans {
            var seen = Set<String>()
            for (index, (record, plan)) in zip(records, plans).enumerated() {
                guard plan.verificationStates.isEmpty else { return nil }
                var outcomes: [ActionOutcome] = []
                for step in plan.steps {
                    if case .oauthToken? = step.subject { return nil }
                    if let (_, sub) = step.subject?.googleSubject {
                        scopes.append(step.accountScope(keyIssuer: record.issuer))
                        subjects.append(sub)
                    }
                    if let email = step.subject?.email { emails.append(email.lowercased()) }
                    for action in step.actions {
                        outcomes.append(ActionOutcome(action: action, eventIndex: step.eventIndex, result: ActionOutcome.accountFree(action, step: step) ?? ActionOutcome.unknownSubject))
                    }
                }
                // A SET twice in the batch is stored (and applied) once.
                guard seen.insert(Self.key(record.issuer, record.tokenID)).inserted else { continue }
                applied += outcomes.map { (record.issuer, record.tokenID, $0.eventIndex, $0.action.rawValue, $0.result) }
                applies[index] = (plan, outcomes)
            }
        }
        let logger = database.logger
        let inline = plans != nil
        let sorted = Self.sorted(records)
        let rows = try await connection.execute(
            StoreBatch(records: sorted.records, done: inline ? now : nil, accounts: (scopes, subjects, emails), applied: applied, notify: !inline),
            logger: logger)
        var ids: [String: Int64] = [:]
        var known = false
        for try await (kind, id, issuer, jti) in rows {
            if kind == "known" { known = true }
            if kind == "set", let id, let issuer, let jti { ids[Self.key(issuer, jti)] = id }
        }
        if known { return nil }
        // The statement's own transaction commits at the protocol's Sync, after its rows: the
        // next query on the connection runs only once that COMMIT has returned. Counting
        // redeliveries is such a query; without any, the caller's next one.
        let outcomes = try await Self.outcomes(sorted, ids: ids, connection: connection, logger: logger)
        let end = wallClock()
        let results = outcomes.enumerated().map { index, outcome -> Appended in
            guard case .accepted = outcome, let (plan, results) = applies[index] else { return (outcome, []) }
            return (outcome, [InlineActions.line(records[index], plan, now: now, outcomes: results, end: end)])
        }
        return (results, !outcomes.allSatisfy { if case .accepted = $0 { true } else { false } })
    }

    /// A batch about accounts of the store's: one transaction in which each new SET's actions are
    /// applied. Unguarded first; if an action fails, the caller writes the batch again with each
    /// SET's actions in a savepoint, and only the failing SET is stored pending, for the worker to
    /// retry with backoff. Returns the results and how many SETs were left pending.
    private func applyInTransaction(
        _ records: [SETRecord], plans: [ActionPlan], tokenKey: [UInt8], guarded: Bool, now: Double, on connection: PostgresConnection
    ) async throws -> (results: [Appended], queued: Int) {
        let logger = database.logger
        return try await connection.withTransaction(logger: logger) { connection -> ([Appended], Int) in
            let sorted = Self.sorted(records)
            var ids: [String: Int64] = [:]
            let rows = try await connection.execute(
                StoreBatch(records: sorted.records, done: now, accounts: ([], [], []), applied: [], notify: false), logger: logger)
            for try await (kind, id, issuer, jti) in rows {
                if kind == "set", let id, let issuer, let jti { ids[Self.key(issuer, jti)] = id }
            }
            let outcomes = try await Self.outcomes(sorted, ids: ids, connection: connection, logger: logger)
            var results = outcomes.map { (outcome: $0, followUp: [EventLogRecord]()) }
            var pending = 0
            var inline = Inline(applier: PostgresActionApplier(connection: connection, tokenKey: tokenKey, logger: logger))
            let fresh = records.indices.filter { if case .accepted = outcomes[$0] { true } else { false } }
            try await inline.applier.preload(fresh.map { (steps: plans[$0].steps, keyIssuer: records[$0].issuer) })
            for index in fresh {
                guard case .accepted(let id) = outcomes[index] else { continue }
                let (lines, applied) = try await InlineActions.apply(
                    plans[index], to: records[index], setID: id, now: now, guarded: guarded, in: &inline, clock: wallClock)
                results[index].followUp = lines
                if !applied { pending += 1 }
            }
            try await inline.applier.recordApplied(now: now)
            // Idle workers on every receiver wake at COMMIT (a hint only: they poll anyway).
            if pending > 0 { try await connection.query("SELECT pg_notify(\(PostgresWorkQueue.channel), '')", logger: logger) }
            return (results, pending)
        }
    }

    /// The transaction's statements for `InlineActions`.
    struct Inline: InlineActions.AsyncTransaction {
        var applier: PostgresActionApplier
        var connection: PostgresConnection { applier.connection }

        func savepoint() async throws { try await connection.query("SAVEPOINT inline", logger: applier.logger) }
        func release() async throws { try await connection.query("RELEASE inline", logger: applier.logger) }
        func rollbackToSavepoint() async throws { try await connection.query("ROLLBACK TO inline", logger: applier.logger) }

        mutating func apply(_ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double) async throws
            -> (outcomes: [ActionOutcome], followUp: [EventLogRecord])
        {
            do {
                let outcomes = try await applier.apply(plan, setID: setID, keyIssuer: record.issuer, now: now)
                return (
                    outcomes,
                    try await PostgresVerifications.records(
                        for: plan, claims: record.claims, id: setID, jti: record.tokenID, compact: record.token, connection: connection,
                        logger: applier.logger, now: now)
                )
            } catch {
                // In the server's words for the SET's `deferred` line.
                throw PostgresDatabase.explained(error)
            }
        }

        mutating func deferToQueue(setID: Int64) async throws {
            applier.forget(setID: setID)
            try await connection.query(
                "UPDATE sets SET state = 'pending', attempts = 0, processed_at = NULL WHERE id = \(setID)", logger: applier.logger)
        }
    }

    /// The batch in (issuer, jti) order, as every receiver writes its batches: two batches that
    /// share SETs then wait for each other's rows in the same order, never in a cycle.
    private static func sorted(_ batch: [SETRecord]) -> (records: [SETRecord], positions: [Int]) {
        let order = batch.indices.sorted { (batch[$0].issuer, batch[$0].tokenID) < (batch[$1].issuer, batch[$1].tokenID) }
        return (order.map { batch[$0] }, order)
    }

    /// The outcomes in the batch's order: accepted for the inserted ones (the first of the batch
    /// with its (issuer, jti)), the others counted as redeliveries.
    private static func outcomes(
        _ sorted: (records: [SETRecord], positions: [Int]), ids: [String: Int64], connection: PostgresConnection, logger: Logger
    ) async throws -> [AppendOutcome] {
        var ids = ids
        var outcomes = [AppendOutcome?](repeating: nil, count: sorted.records.count)
        for (position, record) in zip(sorted.positions, sorted.records) {
            if let id = ids.removeValue(forKey: key(record.issuer, record.tokenID)) {
                outcomes[position] = .accepted(id: id)
                continue
            }
            let counted = try await connection.query(
                """
                UPDATE sets SET deliveries = deliveries + 1, last_received_at = greatest(last_received_at, \(record.receivedAt))
                WHERE issuer = \(record.issuer) AND jti = \(record.tokenID) RETURNING id, deliveries
                """, logger: logger)
            var outcome: AppendOutcome?
            for try await (id, deliveries) in counted.decode((Int64, Int64).self) { outcome = .duplicate(id: id, deliveries: deliveries) }
            guard let outcome else { throw StoreError(.failed, "a duplicate SET vanished from the store") }
            outcomes[position] = outcome
        }
        return outcomes.compactMap { $0 }
    }

    private static func key(_ issuer: String, _ jti: String) -> String { issuer + "\u{0}" + jti }
}

/// The statement that stores a batch, prepared once per connection (planning it took longer than
/// running it): the SETs (done at `done`, or pending) with
/// `INSERT … SELECT FROM unnest(…) ON CONFLICT (issuer, jti) DO NOTHING` and their `applied`
/// rows, unless one of `accounts` (Google subjects by issuer scope, emails) is an account of the
/// store's; `notify` wakes idle workers if anything was stored. Rows: `('set', id, issuer, jti)`
/// for each SET stored, `('known', …)` when an account stopped it, `('notified', …)`.
struct StoreBatch: PostgresPreparedStatement {
    typealias Applied = (issuer: String, jti: String, event: Int, action: String, result: String)
    typealias Row = (String, Int64?, String?, String?)

    /// The statement's name on the connection. PostgresNIO's default, `String(reflecting:)` of the
    /// type, is built again at every execution (a profile of a receiver's tasks: 3.6 %).
    static let name = "risc_store_batch"

    let records: [SETRecord]
    let done: Double?
    let accounts: (scopes: [String], subjects: [String], emails: [String])
    let applied: [Applied]
    let notify: Bool

    static let sql = """
        WITH known AS (
            SELECT 1 FROM accounts a JOIN unnest($1::text[], $2::text[]) AS u(i, s) ON a.issuer = u.i AND a.subject = u.s
            UNION ALL SELECT 1 FROM accounts WHERE email = ANY($3::text[])
            LIMIT 1),
        ins AS (
            INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, remote, content_type, event_types, subjects, token,
                              state, attempts, processed_at)
            SELECT i, j, s, a, r, r, NULLIF(rm, ''), NULLIF(ct, ''), e, sb, tk, $14::text, $15::int4, $16::float8
            FROM unnest($4::text[], $5::text[], $6::text[], $7::float8[], $8::float8[], $9::text[], $10::text[], $11::text[], $12::text[],
                        $13::text[]) AS t(i, j, s, a, r, rm, ct, e, sb, tk)
            WHERE NOT EXISTS (SELECT 1 FROM known)
            ON CONFLICT (issuer, jti) DO NOTHING
            RETURNING id, issuer, jti),
        app AS (
            INSERT INTO applied_actions (set_id, event_index, action, applied_at, result)
            SELECT ins.id, p.e, p.a, coalesce($16::float8, 0), p.r
            FROM ins JOIN unnest($17::text[], $18::text[], $19::int8[], $20::text[], $21::text[]) AS p(i, j, e, a, r)
                 ON ins.issuer = p.i AND ins.jti = p.j)
        SELECT 'set', id, issuer, jti FROM ins
        UNION ALL SELECT 'known', NULL, NULL, NULL FROM known
        UNION ALL SELECT 'notified', NULL, NULL, NULL FROM pg_notify('\(PostgresWorkQueue.channel)', '') WHERE $22::bool AND EXISTS (SELECT 1 FROM ins)
        """

    func makeBindings() throws -> PostgresBindings {
        var binds = PostgresBindings(capacity: 22)
        binds.append(accounts.scopes)
        binds.append(accounts.subjects)
        binds.append(accounts.emails)
        binds.append(records.map(\.issuer))
        binds.append(records.map(\.tokenID))
        binds.append(records.map(\.claimedIssuer))
        binds.append(records.map(\.issuedAt))
        binds.append(records.map(\.receivedAt))
        binds.append(records.map { $0.remoteAddress ?? "" })
        binds.append(records.map { $0.contentType ?? "" })
        binds.append(records.map { JSONValue.array($0.eventTypes.map { .string($0) }).serialized })
        binds.append(records.map(\.subjectsJSON))
        binds.append(records.map(\.token))
        binds.append(done == nil ? "pending" : "done")
        binds.append(Int32(done == nil ? 0 : 1))
        if let done { binds.append(done) } else { binds.appendNull() }
        binds.append(applied.map(\.issuer))
        binds.append(applied.map(\.jti))
        binds.append(applied.map { Int64($0.event) })
        binds.append(applied.map(\.action))
        binds.append(applied.map(\.result))
        binds.append(notify)
        return binds
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
