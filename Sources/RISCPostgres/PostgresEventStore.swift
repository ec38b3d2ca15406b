import Foundation
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
    let counts = Mutex<(commits: Int, rows: Int)>((0, 0))

    /// Called after a commit that left work queued (this receiver's worker wakes without waiting
    /// for the notification).
    public let afterCommit = Mutex<(@Sendable () -> Void)?>(nil)

    /// With an action table (no webhook: actions go to the store's accounts), each new SET's
    /// actions are applied in the transaction that stores it and the SET is stored done; the
    /// queue then holds only what failed here. The token key is for `token-revoked` lookups.
    let inline = Mutex<(table: ActionTable, tokenKey: [UInt8])?>(nil)

    public init(
        database: PostgresDatabase, maxBatch: Int = 512, pipeline: Int = 1, commitDeadline: Double = 5,
        clock: (@Sendable () -> Double)? = nil, watchInterval: Double = 0.05
    ) {
        self.database = database
        self.maxBatch = maxBatch
        self.pipeline = max(1, pipeline)
        self.commitDeadline = commitDeadline
        self.clock = clock ?? database.clock
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
        var next = nextBatch(committer, unconfirmed: [])
        while let batch = next {
            do {
                next = try await database.client.withConnection { connection in
                    await commitBatches(on: connection, committer, first: batch)
                }
            } catch {  // no connection
                guard answer(committer, batch, .failure(error)) else { return }
                next = nextBatch(committer, unconfirmed: [])
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
                return nextBatch(committer, unconfirmed: [])
            }
            while true {
                if let next = nextBatch(committer, unconfirmed: unconfirmed?.batch ?? []) {
                    batch = next
                    break
                }
                // Nobody waits: the last batch's COMMIT is confirmed by a round trip of its own.
                guard let (earlier, earlierResults) = unconfirmed else { return nil }
                let confirmed = await confirm(earlierResults, on: connection)
                guard answer(committer, earlier, confirmed) else { return nil }
                unconfirmed = nil
                if case .failure = confirmed { return nextBatch(committer, unconfirmed: []) }
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

    /// The next batch for `committer`, registered (with the `unconfirmed` one before it) as its
    /// SETs in flight, for the watch. Nil when nobody waits (the committer ends, unless
    /// `unconfirmed` still waits for its confirmation) or when the watch took the committer's SETs.
    private func nextBatch(_ committer: Int, unconfirmed: [Waiting]) -> [Waiting]? {
        state.withLock { state -> [Waiting]? in
            guard state.committing[committer] != nil else { return nil }
            guard !state.waiting.isEmpty else {
                if unconfirmed.isEmpty {
                    state.running -= 1
                    state.committing[committer] = nil
                }
                return nil
            }
            let batch = Array(state.waiting.prefix(maxBatch))
            state.waiting.removeFirst(batch.count)
            state.committing[committer]?.batch = unconfirmed + batch
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
}
