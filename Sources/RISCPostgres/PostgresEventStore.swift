import Foundation
import Logging
import NIOCore
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
    /// The times the store records (`processed_at`, the actions' times and their event-log
    /// lines): the receiver's clock.
    let wallClock: @Sendable () -> Double

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
    /// Each pooled connection's commit watch (nil: it could not join), by connection.
    private let watches = Mutex<[PostgresConnection.ID: CommitWatch?]>([:])
    /// Connections being closed after a batch's COMMIT failed on them (`close`): no batch is sent
    /// on them any more, not even the one a committer took while that batch was being answered.
    private let closing = Mutex<Set<PostgresConnection.ID>>([])
    /// Transactions committed and rows sent, for metrics; batches committed off the pool's event
    /// loop (none: the committers run on it, `PostgresDatabase.loopExecutor`), for tests.
    let counts = Mutex<(commits: Int, rows: Int, offLoop: Int)>((0, 0, 0))

    /// Called after a commit that left work queued (this receiver's worker wakes without waiting
    /// for the notification).
    public let afterCommit = Mutex<(@Sendable () -> Void)?>(nil)

    /// With an action table (no webhook: actions go to the store's accounts), each new SET's
    /// actions are applied in the transaction that stores it and the SET is stored done; the
    /// queue then holds only what failed here. The token key is for `token-revoked` lookups.
    let inline = Mutex<(table: ActionTable, tokenKey: [UInt8])?>(nil)

    public init(
        database: PostgresDatabase, maxBatch: Int = 512, pipeline: Int = 1, commitDeadline: Double = 5,
        clock: (@Sendable () -> Double)? = nil, watchInterval: Double = 0.05,
        wallClock: @escaping @Sendable () -> Double = systemNow
    ) {
        self.database = database
        self.maxBatch = maxBatch
        self.pipeline = max(1, pipeline)
        self.commitDeadline = commitDeadline
        self.clock = clock ?? database.clock
        self.watchInterval = watchInterval
        self.wallClock = wallClock
    }

    public func enableInlineActions(table: ActionTable, tokenKey: [UInt8]) { inline.withLock { $0 = (table, tokenKey) } }
    /// A reloaded action table for the SETs stored from now on (when actions are inline).
    public func updateInlineTable(_ table: ActionTable) { inline.withLock { $0?.table = table } }

    public var writeCounts: (commits: Int, rows: Int) { counts.withLock { ($0.commits, $0.rows) } }
    /// Batches committed off the pool's event loop (tests: none).
    var batchesOffLoop: Int { counts.withLock { $0.offLoop } }

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
        let task = Task(executorPreference: PostgresDatabase.loopExecutor) { await self.commitWhileWaiting(committer) }
        state.withLock { if $0.committing[committer] != nil { $0.committing[committer]?.task = task } }
    }

    /// One of the `pipeline` committers: leases a connection and commits batches on it until
    /// nobody waits, or until the watch gave up on its SETs (it then ends; the watch started
    /// another if SETs wait). After a batch failed, its connection goes back to the pool and the
    /// next batch leases one.
    private func commitWhileWaiting(_ committer: Int) async {
        var next = nextBatch(committer, confirming: false)
        while let batch = next {
            do {
                next = try await database.client.withConnection { connection in
                    await commitBatches(on: connection, committer, first: batch)
                }
            } catch {  // no connection
                guard answer(committer, batch, .failure(error)) else { return }
                next = nextBatch(committer, confirming: false)
            }
        }
    }

    /// Commits batches on one connection while SETs keep coming. A batch stored by the
    /// one-statement path commits at the protocol's Sync, after its rows came back: its SETs are
    /// answered from the connection's event loop when the ReadyForQuery after that COMMIT is read
    /// (`CommitWatch`; with `synchronous_commit` on, the WAL is then on disk), while the next
    /// batch's statement goes out behind it. Where the watch cannot tell, a `SELECT 1` sent at
    /// once confirms the COMMIT instead (the connection runs it only once the COMMIT returned).
    /// Returns the batch to commit on another connection after this one failed one; nil when
    /// nobody waits or the watch took over.
    private func commitBatches(on connection: PostgresConnection, _ committer: Int, first: [Waiting]) async -> [Waiting]? {
        var batch = first
        var confirming: Confirmation?
        let watch = await commitWatch(on: connection)
        while true {
            // The batch before failed at its COMMIT and this connection is closing (its answer, on
            // the connection's loop, can come before this committer's next batch): this batch goes
            // to another connection, once this one has closed (the pool must not lease it again).
            if connection.isClosed || closing.withLock({ $0.contains(connection.id) }) {
                _ = try? await connection.closeFuture.get()
                return batch
            }
            let outcome: Result<(results: [Appended], committed: Bool), any Error>
            do {
                outcome = .success(try await commit(batch.map(\.record), on: connection))
            } catch {
                outcome = .failure(error)
            }
            // The batch before was answered first: its ReadyForQuery (or `SELECT 1`) came before this batch's rows.
            if let earlier = confirming, !(await Self.settled(earlier).mine) { return nil }
            confirming = nil
            switch outcome {
            case .failure(let error):
                guard answer(committer, batch, .failure(error)) else { return nil }
                return nextBatch(committer, confirming: false)
            case .success(let (results, true)):
                guard answer(committer, batch, .success(results)) else { return nil }
            case .success(let (results, false)):
                confirming = confirm(batch, results, committer, on: connection, watch: watch)
            }
            if let next = nextBatch(committer, confirming: confirming != nil) {
                batch = next
                continue
            }
            // Nobody waits: the last batch's confirmation is waited for here.
            guard let earlier = confirming else { return nil }
            let (mine, confirmed) = await Self.settled(earlier)
            confirming = nil
            guard mine else { return nil }
            // After a failed confirmation the next batch takes another connection, once this one
            // has closed (`confirm` closes it): the pool must not lease it again meanwhile.
            guard confirmed else {
                _ = try? await connection.closeFuture.get()
                return nextBatch(committer, confirming: false)
            }
            guard let next = nextBatch(committer, confirming: false) else { return nil }
            batch = next
        }
    }

    /// A batch's confirmation: whether this committer answered it (false: the watch had), and
    /// whether its COMMIT was confirmed (false: it was answered with the error).
    private typealias Confirmation = EventLoopFuture<(mine: Bool, confirmed: Bool)>

    /// Answers `batch` with `results` once its COMMIT is known: by `watch`, or by a `SELECT 1`
    /// sent now on `connection` (ahead of anything sent after this call) when there is no watch
    /// or it cannot tell; with the error when the COMMIT failed or the connection closed first.
    private func confirm(
        _ batch: [Waiting], _ results: [Appended], _ committer: Int, on connection: PostgresConnection, watch: CommitWatch?
    ) -> Confirmation {
        guard let watch else { return confirmByQuery(batch, results, committer, on: connection) }
        return watch.lastBatch().flatMap { outcome -> Confirmation in
            switch outcome {
            case .committed:
                return connection.eventLoop.makeSucceededFuture((self.answer(committer, batch, .success(results)), true))
            case .failed:
                self.close(connection)
                let error = StoreError(.unavailable, "PostgreSQL at \(self.database.url): the batch's COMMIT failed or the connection closed before it returned")
                return connection.eventLoop.makeSucceededFuture((self.answer(committer, batch, .failure(error)), false))
            case .unknown:
                return self.confirmByQuery(batch, results, committer, on: connection)
            }
        }
    }

    private func confirmByQuery(_ batch: [Waiting], _ results: [Appended], _ committer: Int, on connection: PostgresConnection) -> Confirmation {
        connection.query("SELECT 1", logger: database.logger)
            .map { _ in (self.answer(committer, batch, .success(results)), true) }
            .recover { error in
                self.close(connection)
                return (self.answer(committer, batch, .failure(error)), false)
            }
    }

    /// Closes a connection whose batch was not confirmed. After an error past CommandComplete
    /// (a COMMIT refused) PostgresNIO leaves whatever is queued on the connection unanswered: the
    /// confirming `SELECT 1` used to wait out the whole commit deadline, and a batch sent on it
    /// did in a test on a loaded machine (the pool had leased it again). Closed, what is queued
    /// fails at once and the pool drops it.
    private func close(_ connection: PostgresConnection) {
        let id = connection.id
        closing.withLock { _ = $0.insert(id) }
        connection.close().whenComplete { _ in }
        connection.closeFuture.whenComplete { _ in _ = self.closing.withLock { $0.remove(id) } }
    }

    /// The commit watch of `connection`, joined at its first batch; nil where it cannot join.
    private func commitWatch(on connection: PostgresConnection) async -> CommitWatch? {
        let id = connection.id
        if let known = watches.withLock({ $0[id] }) { return known }
        let watch = await CommitWatch.install(on: connection)
        if watch == nil { database.logger.debug("commit watch cannot join connection \(id): its batches are confirmed by a query each") }
        watches.withLock { $0[id] = .some(watch) }
        connection.closeFuture.whenComplete { _ in _ = self.watches.withLock { $0.removeValue(forKey: id) } }
        return watch
    }

    /// A confirmation's outcome (it never fails: `confirm` answers the error).
    private static func settled(_ confirmation: Confirmation) async -> (mine: Bool, confirmed: Bool) {
        (try? await confirmation.get()) ?? (false, false)
    }

    /// The next batch for `committer`, added to its SETs in flight (answered oldest first), for
    /// the watch. Nil when nobody waits (the committer ends, unless a batch of it is still
    /// `confirming`) or when the watch took the committer's SETs.
    private func nextBatch(_ committer: Int, confirming: Bool) -> [Waiting]? {
        state.withLock { state -> [Waiting]? in
            guard state.committing[committer] != nil else { return nil }
            guard !state.waiting.isEmpty else {
                if !confirming {
                    state.running -= 1
                    state.committing[committer] = nil
                }
                return nil
            }
            let batch = Array(state.waiting.prefix(maxBatch))
            state.waiting.removeFirst(batch.count)
            state.committing[committer]?.batch.append(contentsOf: batch)
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
        case .failure(let error):
            // In the server's words, for the `failed` line and the 503 (PostgresNIO's own says nothing).
            let told = PostgresDatabase.explained(error)
            for waiting in batch { waiting.completion(.failure(told)) }
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
                var expired = state.waiting.filter { hasPassed(commitDeadline, since: $0.since, now: now) }
                state.waiting.removeAll { hasPassed(commitDeadline, since: $0.since, now: now) }
                var cancelled: [Task<Void, Never>] = []
                for (committer, running) in state.committing where running.batch.contains(where: { hasPassed(commitDeadline, since: $0.since, now: now) }) {
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
}
