public import Foundation
import Logging
import PostgresNIO
public import RISCCore
public import Synchronization

/// The shared store's `EventStore`: several receivers append to one PostgreSQL database.
///
/// Group commit: appends that arrive while `pipeline` batches are in flight wait for the next
/// one, and each batch is stored with one multi-row
/// `INSERT … SELECT FROM unnest(…) ON CONFLICT (issuer, jti) DO NOTHING` (see `commit`). `append`
/// returns once COMMIT has returned, which with `synchronous_commit` on (checked at start) means
/// the WAL is on disk. A SET already stored, by this receiver or another, even one committing at the same
/// instant (the unique index makes the second insert wait for the first), is counted in
/// `deliveries` and reported as a duplicate.
public final class PostgresEventStore: EventStore, Sendable {
    public let database: PostgresDatabase
    public let maxBatch: Int
    /// How many batches may be committing at once. One by default: while a batch commits, the
    /// SETs that arrive wait and go together in the next, so batches grow with the load and each
    /// transaction's fixed cost (round trips, the WAL flush, PostgreSQL's per-statement work) is
    /// shared by more SETs. On a 2-core machine with PostgreSQL beside the receivers, three at once
    /// halved the batches and cost two receivers a quarter of their rate (docs/performance.md).
    public let pipeline: Int
    /// Seconds a SET may wait for its COMMIT, queueing included, before its request is answered 503.
    public let commitDeadline: Double
    /// Now, in seconds: when a SET started waiting and whether its deadline has passed (tests
    /// drive it). The watch that compares the two wakes every `watchInterval` seconds while
    /// anything waits, so a SET is answered at most that much after its deadline.
    let clock: @Sendable () -> Double
    let watchInterval: Double

    /// A SET waiting for a transaction: since when, and whom to tell (once).
    private typealias Waiting = (record: SETRecord, since: Double, completion: @Sendable (StoreResult) -> Void)
    /// The SETs not yet answered: waiting for a batch, or in one being committed (by committer
    /// number, with that committer's task); whether the deadline watch runs.
    private struct Pending {
        var waiting: [Waiting] = []
        var committing: [Int: (batch: [Waiting], task: Task<Void, Never>?)] = [:]
        var running = 0, nextCommitter = 0
        var watching = false
    }
    private let state = Mutex(Pending())
    /// Transactions committed and rows sent, for metrics.
    private let counts = Mutex<(commits: Int, rows: Int)>((0, 0))

    /// Called after a commit that left work queued (this receiver's worker wakes without waiting
    /// for the notification).
    public let afterCommit = Mutex<(@Sendable () -> Void)?>(nil)

    /// With an action table (no webhook: actions go to the store's accounts), each new SET's
    /// actions are applied in the transaction that stores it and the SET is stored done; the
    /// queue then holds only what failed here. The token key is for `token-revoked` lookups.
    private let inline = Mutex<(table: ActionTable, tokenKey: [UInt8])?>(nil)

    public init(
        database: PostgresDatabase, maxBatch: Int = 512, pipeline: Int = 1, commitDeadline: Double = 5,
        clock: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }, watchInterval: Double = 0.05
    ) {
        self.database = database
        self.maxBatch = maxBatch
        self.pipeline = max(1, pipeline)
        self.commitDeadline = commitDeadline
        self.clock = clock
        self.watchInterval = watchInterval
    }

    public func enableInlineActions(table: ActionTable, tokenKey: [UInt8]) { inline.withLock { $0 = (table, tokenKey) } }
    /// A reloaded action table for the SETs stored from now on (when actions are inline).
    public func updateInlineTable(_ table: ActionTable) { inline.withLock { $0?.table = table } }

    public var writeCounts: (commits: Int, rows: Int) { counts.withLock { $0 } }

    /// Stores `record` (see the type's comment); gives up after `commitDeadline` counted from now,
    /// queueing included, so a request never waits longer than that for its answer.
    public func append(_ record: SETRecord) async throws -> AppendOutcome {
        try await appendReporting(record).outcome
    }

    public func appendReporting(_ record: SETRecord) async throws -> (outcome: AppendOutcome, followUp: [EventLogRecord]) {
        try await withCheckedThrowingContinuation { continuation in
            appendReporting(record) { continuation.resume(with: $0) }
        }
    }

    /// The push endpoint's path: `completion` is called once, with the outcome or, at the latest
    /// `commitDeadline` (and one `watchInterval`) after this call, with `StoreError.timeout`.
    public func appendReporting(_ record: SETRecord, completion: @escaping @Sendable (StoreResult) -> Void) {
        let (committer, watch) = state.withLock { state -> (Int?, Bool) in
            state.waiting.append((record, clock(), completion))
            let watch = !state.watching
            state.watching = true
            return (state.running < pipeline ? Self.startCommitter(&state) : nil, watch)
        }
        if let committer { launch(committer) }
        if watch { Task { await watchDeadlines() } }
    }

    private static func startCommitter(_ state: inout Pending) -> Int {
        state.running += 1
        state.nextCommitter += 1
        state.committing[state.nextCommitter] = ([], nil)
        return state.nextCommitter
    }

    private func launch(_ committer: Int) {
        let task = Task { await commitWhileWaiting(committer) }
        state.withLock { if $0.committing[committer] != nil { $0.committing[committer]?.task = task } }
    }

    /// One of the `pipeline` committers: leases a connection and commits batches on it until
    /// nobody waits, or until the watch gave up on its SETs (it then ends; the watch started
    /// another if SETs wait). After a batch failed, its connection goes back to the pool and the
    /// next batch leases one.
    private func commitWhileWaiting(_ committer: Int) async {
        var next = nextBatch(committer, unproved: [])
        while let batch = next {
            do {
                next = try await database.client.withConnection { connection in
                    await commitBatches(on: connection, committer, first: batch)
                }
            } catch {  // no connection
                guard answer(committer, batch, .failure(error)) else { return }
                next = nextBatch(committer, unproved: [])
            }
        }
    }

    /// Commits batches on one connection while SETs keep coming. A batch stored by the
    /// one-statement path commits at the protocol's Sync, after its rows came back, and the
    /// connection runs its next query only once that COMMIT has returned (with
    /// `synchronous_commit` on: the WAL is on disk). So a batch is answered as soon as the next
    /// batch's first statement on the same connection has answered, and only the last one before
    /// a pause pays a round trip of its own (`SELECT 1`). Returns the batch to commit on another
    /// connection after this one failed one; nil when nobody waits or the watch took over.
    private func commitBatches(on connection: PostgresConnection, _ committer: Int, first: [Waiting]) async -> [Waiting]? {
        var batch = first
        var unconfirmed: (batch: [Waiting], results: [Appended])?
        var abandoned = false
        while true {
            do {
                let (results, committed) = try await commit(batch.map(\.record), on: connection) {
                    // This batch's first statement ran: the one before it had committed.
                    guard let (earlier, earlierResults) = unconfirmed else { return }
                    unconfirmed = nil
                    abandoned = !answer(committer, earlier, .success(earlierResults))
                }
                if abandoned { return nil }
                if committed {
                    guard answer(committer, batch, .success(results)) else { return nil }
                } else {
                    unconfirmed = (batch, results)
                }
            } catch {
                if abandoned { return nil }
                if let (earlier, earlierResults) = unconfirmed {
                    let confirmed: Result<[Appended], any Error> = await confirm(earlierResults, on: connection)
                    guard answer(committer, earlier, confirmed) else { return nil }
                }
                guard answer(committer, batch, .failure(error)) else { return nil }
                return nextBatch(committer, unproved: [])
            }
            while true {
                if let next = nextBatch(committer, unproved: unconfirmed?.batch ?? []) {
                    batch = next
                    break
                }
                // Nobody waits: the last batch's COMMIT is confirmed by a round trip of its own.
                guard let (earlier, earlierResults) = unconfirmed else { return nil }
                let confirmed = await confirm(earlierResults, on: connection)
                guard answer(committer, earlier, confirmed) else { return nil }
                unconfirmed = nil
                if case .failure = confirmed { return nextBatch(committer, unproved: []) }
            }
        }
    }

    /// `results` once a query on `connection` ran after their batch's Sync; its error if not.
    private func confirm(_ results: [Appended], on connection: PostgresConnection) async -> Result<[Appended], any Error> {
        do {
            try await connection.query("SELECT 1", logger: database.logger)
            return .success(results)
        } catch {
            return .failure(error)
        }
    }

    /// The next batch for `committer`, registered (with the `unproved` one before it) as its
    /// SETs in flight, for the watch. Nil when nobody waits (the committer ends, unless
    /// `unproved` still waits for its confirmation) or when the watch took the committer's SETs.
    private func nextBatch(_ committer: Int, unproved: [Waiting]) -> [Waiting]? {
        state.withLock { state -> [Waiting]? in
            guard state.committing[committer] != nil else { return nil }
            guard !state.waiting.isEmpty else {
                if unproved.isEmpty {
                    state.running -= 1
                    state.committing[committer] = nil
                }
                return nil
            }
            let batch = Array(state.waiting.prefix(maxBatch))
            state.waiting.removeFirst(batch.count)
            state.committing[committer]?.batch = unproved + batch
            return batch
        }
    }

    /// Answers `batch`, the oldest of `committer`'s SETs in flight; false when the watch answered
    /// them already (the deadline passed: a SET whose COMMIT did land meanwhile is a duplicate
    /// when Google retries it, answered 202), and the committer ends.
    private func answer(_ committer: Int, _ batch: [Waiting], _ result: Result<[Appended], any Error>) -> Bool {
        let mine = state.withLock { state -> Bool in
            guard let inFlight = state.committing[committer]?.batch.count else { return false }
            state.committing[committer]?.batch.removeFirst(min(batch.count, inFlight))
            return true
        }
        guard mine else { return false }
        switch result {
        case .success(let results): for (waiting, result) in zip(batch, results) { waiting.completion(.success(result)) }
        case .failure(let error): for waiting in batch { waiting.completion(.failure(error)) }
        }
        return true
    }

    /// While SETs wait: answers those past their deadline with `StoreError.timeout`, waiting or in
    /// a batch; a committer whose batch it answered is cancelled and replaced, so a stuck
    /// transaction holds up no SET that arrives after it.
    private func watchDeadlines() async {
        while true {
            try? await Task.sleep(for: .seconds(watchInterval))
            let now = clock()
            let (expired, cancelled, replacements, done) = state.withLock { state -> ([Waiting], [Task<Void, Never>], [Int], Bool) in
                var expired = state.waiting.filter { now - $0.since >= commitDeadline }
                state.waiting.removeAll { now - $0.since >= commitDeadline }
                var cancelled: [Task<Void, Never>] = []
                for (committer, running) in state.committing where running.batch.contains(where: { now - $0.since >= commitDeadline }) {
                    expired += running.batch
                    if let task = running.task { cancelled.append(task) }
                    state.committing[committer] = nil
                    state.running -= 1
                }
                var replacements: [Int] = []
                while state.running < pipeline && !state.waiting.isEmpty { replacements.append(Self.startCommitter(&state)) }
                let done = state.waiting.isEmpty && state.committing.values.allSatisfy(\.batch.isEmpty)
                if done { state.watching = false }
                return (expired, cancelled, replacements, done)
            }
            for task in cancelled { task.cancel() }
            for waiting in expired {
                waiting.completion(.failure(StoreError.timeout(seconds: commitDeadline, what: "storing a SET")))
            }
            for committer in replacements { launch(committer) }
            if done { return }
        }
    }

    /// One SET's outcome and the event-log lines of what was done with it in the same transaction.
    typealias Appended = (outcome: AppendOutcome, followUp: [EventLogRecord])

    /// Stores the batch; the outcomes (and inline actions' event-log lines) in the batch's order.
    ///
    /// Most batches take one statement and one round trip to acknowledge: when no SET in it is
    /// about an account the store holds (or its actions go to a webhook), the SETs, their
    /// `applied_actions` rows and the wake-up notification are written by one statement in its
    /// own transaction. Otherwise the batch is a transaction in which each SET's actions are
    /// applied (see `applyInTransaction`). `started` is called once the batch's first statement
    /// has answered; `committed`: whether the COMMIT is known done (else the next query on
    /// `connection` confirms it: `commitBatches`).
    func commit(
        _ records: [SETRecord], on connection: PostgresConnection, started: () -> Void
    ) async throws -> (results: [Appended], committed: Bool) {
        let inline = self.inline.withLock { $0 }
        let now = Date().timeIntervalSince1970
        let results: [Appended], queued: Int, committed: Bool
        if let inline {
            let plans = records.map { ActionPlan.plan(for: $0.claims, table: inline.table) }
            if let fast = try await storeWithoutAccounts(records, plans: plans, now: now, on: connection, started: started) {
                (results, queued, committed) = (fast.results, 0, fast.committed)
            } else {
                do {
                    (results, queued) = try await applyInTransaction(
                        records, plans: plans, tokenKey: inline.tokenKey, guarded: false, now: now, on: connection, started: started)
                } catch let error as PostgresTransactionError where error.closureError is InlineActions.Unguarded {
                    (results, queued) = try await applyInTransaction(
                        records, plans: plans, tokenKey: inline.tokenKey, guarded: true, now: now, on: connection, started: started)
                }
                committed = true
            }
        } else {
            // Actions go to a webhook: stored pending, for the workers. Without plans there is no
            // account to look for, so the statement never stops.
            guard let stored = try await storeWithoutAccounts(records, plans: nil, now: now, on: connection, started: started) else {
                preconditionFailure("the one-statement path stopped without accounts to look for")
            }
            (results, committed) = stored
            queued = results.filter { if case .accepted = $0.outcome { true } else { false } }.count
        }
        counts.withLock {
            $0.commits += 1
            $0.rows += records.count
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
        _ records: [SETRecord], plans: [ActionPlan]?, now: Double, on connection: PostgresConnection, started: () -> Void
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
                    if let (issuer, sub) = step.subject?.googleSubject {
                        scopes.append(SETPolicy.issuerScope(issuer ?? record.issuer))
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
        started()
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
        let end = Date().timeIntervalSince1970
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
        _ records: [SETRecord], plans: [ActionPlan], tokenKey: [UInt8], guarded: Bool, now: Double, on connection: PostgresConnection,
        started: () -> Void
    ) async throws -> (results: [Appended], queued: Int) {
        let logger = database.logger
        return try await connection.withTransaction(logger: logger) { connection -> ([Appended], Int) in
            started()  // after BEGIN
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
                let (lines, applied) = try await InlineActions.apply(plans[index], to: records[index], setID: id, now: now, guarded: guarded, in: &inline)
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
            let outcomes = try await applier.apply(plan, setID: setID, keyIssuer: record.issuer, now: now)
            return (
                outcomes,
                try await PostgresVerifications.records(
                    for: plan, claims: record.claims, id: setID, jti: record.tokenID, compact: record.token, connection: connection,
                    logger: applier.logger)
            )
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
