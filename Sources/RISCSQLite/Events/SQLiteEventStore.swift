import CSQLite
import Foundation
public import Logging
public import RISCCore
import RISCSQL

/// The embedded default store: SQLite in WAL mode in the data directory, every acknowledged
/// SET fsynced. No server to run.
///
/// **Group commit.** Requests hand their record to one writer thread and wait. The writer takes
/// everything waiting (up to `maxBatch`), writes it in one transaction, and commits once; while
/// it commits, new requests queue up for the next batch, so batches grow with load and an
/// acknowledgement never waits for a timer.
///
/// **Pipelined fsync.** The writer's connection commits without syncing (`synchronous =
/// NORMAL`); a second thread then fdatasyncs the WAL and only after that wakes the batch's
/// waiters. So the next batch is written while the last one's fsync is in flight, and one fsync
/// covers every batch committed before it started. Every outcome is reported after an fsync of
/// the WAL that holds its commit: the same guarantee as `synchronous = FULL` (which fsyncs inside
/// COMMIT, holding up the writer). SQLite itself still syncs the WAL before each checkpoint. If an
/// fsync ever fails, the page cache can no longer be trusted: that batch is answered with an
/// error and the store refuses every later write (503) until the process restarts and SQLite
/// recovers from what is on disk.
public final class SQLiteEventStore: EventStore, JournalingStore, StoreHealth, @unchecked Sendable {  // reason: state under `condition`/`syncCondition`; each connection on its own thread or lock
    public let path: String
    let logger: Logger
    let maxBatch: Int
    let condition = NSCondition()
    /// A record waiting for the writer, with where it ends in the journal when it came that way.
    struct Waiting {
        let record: SETRecord
        let position: SETJournal.Position?
        let completion: @Sendable (StoreResult) -> Void
    }
    var pending: [Waiting] = []
    /// The pushed SETs' durability point, once `openJournal` ran (the receiver's store only).
    var journal: SETJournal?
    /// Journaled records waiting for the writer beyond which new ones go the ordinary way (their
    /// answer then waits for the index: the journal never runs away from it).
    let journalBacklog: Int
    /// How long the writer lets journaled records gather before it indexes them, on `clock`
    /// (`openJournal`; 0: at once). They are durable and answered already; a larger batch writes
    /// each shared page of the index once for all of them and wakes the writer less often (on this
    /// project's 2-core VM the writer's CPU a SET fell by a sixth, docs/performance.md, 2026-12-02).
    /// Their actions and event-log lines come that much later.
    var indexLinger = 0.0
    /// The receiver's `indexLinger`.
    public static let receiverIndexLinger = 0.010
    /// Journaled records that end a linger at once: 64 saved the writer as much CPU as 256 did,
    /// and 256 (a commit of ~8 ms on one of two cores) raised the receiver's p99 by about 1 ms.
    let indexBatchRows = 64
    /// Set while the writer lingers (`linger()`), so that an append that needs it wakes it.
    var lingering = false
    /// Set while the writer cannot index journaled records (they are retried); cleared by a commit.
    var indexFailure: StoreError?
    /// Times the writer put journaled records back to try them again (tests wait for it).
    var indexRetries = 0
    /// Now, in seconds (monotonic by default): when the writer tries journaled records again after
    /// a failure (tests drive it).
    let clock: @Sendable () -> Double
    /// Whether `clock` is a test's (waits on it look at it again every `lingerStep`).
    let clockInjected: Bool
    let wallClock: @Sendable () -> Double
    /// The last journal mark committed and reported without a WAL sync (journaled batches).
    var unsyncedMark: SETJournal.Position?
    /// Journaled SETs committed since the WAL was last handed to the syncer.
    var unsyncedRows = 0
    static let journalSyncRows = 256
    /// Whether every journaled record was indexed (else the segments stay for the next start).
    var journalIndexed = true
    let markStatement: SQLiteStatement
    var stopping = false
    var writerDone = false
    let readLock = NSLock()
    let reader: SQLiteConnection
    var writerStarted = false
    let writer: SQLiteConnection
    let upsert: SQLiteStatement
    let redelivery: SQLiteStatement
    let savepoint: SQLiteStatement
    let begin: SQLiteStatement
    let commitStatement: SQLiteStatement
    let release: SQLiteStatement
    let rollbackToSavepoint: SQLiteStatement
    let checkpointer: SQLiteConnection
    /// The checkpointer sleeps on its own condition, so an append's signal always wakes the writer.
    let checkpointTimer = NSCondition()
    var checkpointerDone = false
    /// Set by the checkpointer when it has nearly caught up with the WAL: the writer then copies
    /// the last few frames itself, between two batches, so the checkpoint completes and the next
    /// transaction starts the WAL over from its beginning (see `checkpointLoop`).
    var finishCheckpoint = false
    /// WAL frames the checkpointer lets the writer copy (a fraction of a millisecond of work).
    static let finishFrames: Int64 = 256

    /// Committed batches waiting for the WAL fsync (`syncLoop`), with their outcomes.
    struct Committed {
        var completions: [@Sendable (StoreResult) -> Void]
        var results: [(outcome: AppendOutcome, followUp: [EventLogRecord])]
        var queued: Int
        /// The journal position this batch's commit recorded, if it held journaled records.
        var mark: SETJournal.Position?

        static func fail(_ batches: [Committed], _ error: any Error) {
            for batch in batches { for completion in batch.completions { completion(.failure(error)) } }
        }
    }
    let syncCondition = NSCondition()
    var unsynced: [Committed] = []
    /// Set (under `syncCondition`) when the writer has handed over its last batch.
    var writerDoneForSync = false
    var syncerDone = false
    /// The writer has handed a batch to the syncer that it has not taken yet (under `condition`).
    var awaitingSync = false
    /// Set once an fsync has failed: every later append fails.
    var syncFailure: StoreError?
    let walPath: String
    var walDescriptor: Int32 = -1
    /// The sync step, replaceable by tests (to fail it); by default fdatasync of the WAL.
    var syncWAL: () throws(StoreError) -> Void = {}

    var commits = 0
    var rowsWritten = 0
    var lastReceived: Double?
    /// Ordinary appends in `pending` (their answer waits for the commit), and whether the batch
    /// being committed holds any (`isBusy`).
    var answersWaiting = 0
    var committingAnswers = false
    /// A batch is being committed and reported (`isIndexing`).
    var committing = false
    /// Called on the syncer thread once a synced batch left work for the queue's worker (SETs
    /// stored pending), to wake it.
    public var afterCommit: (@Sendable () -> Void)? {
        get { condition.withLock { wakeAfterCommit } }
        set { condition.withLock { wakeAfterCommit = newValue } }
    }
    /// `afterCommit`, under `condition`: the receiver's storage service sets it while the syncer runs.
    private var wakeAfterCommit: (@Sendable () -> Void)?
    /// With the embedded account store, each new SET's actions are applied in the transaction that
    /// stores it (`enableInlineActions`); the worker then only retries what failed here.
    var inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?

    /// Transactions committed and rows written, for metrics.
    public var writeCounts: (commits: Int, rows: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (commits, rowsWritten)
    }

    /// Opens (creating if needed) `directory/risc.sqlite3`. `clock`: its deadlines' time
    /// (monotonic by default); `wallClock`: the times it records (`processed_at`, the actions'
    /// times and their event-log lines), the receiver's clock.
    public init(
        directory: String, logger: Logger, maxBatch: Int = 512, clock: (@Sendable () -> Double)? = nil,
        wallClock: @escaping @Sendable () -> Double = systemNow
    ) throws {
        journalBacklog = maxBatch * 8
        self.clock = clock ?? systemUptime
        clockInjected = clock != nil
        self.wallClock = wallClock
        try PrivateFiles.makeDirectory(directory)
        path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        walPath = path + "-wal"
        self.logger = logger
        self.maxBatch = maxBatch
        let database = try SQLiteDatabase(directory: directory)
        // The writer does not sync inside COMMIT (`syncLoop` fsyncs the WAL before any answer);
        // checkpoints run on their own thread (below), never inside a commit that requests wait on.
        writer = try database.connect(.groupCommit)
        // A plain insert that does nothing on a redelivery (then `redelivery` counts it): cheaper
        // than an upsert with RETURNING, which SQLite runs through an ephemeral table.
        upsert = try writer.prepare(
            """
            INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, remote, content_type,
                              event_types, subjects, token, state, attempts, processed_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
            ON CONFLICT (issuer, jti) DO NOTHING
            """)
        redelivery = try writer.prepare(
            """
            UPDATE sets SET deliveries = deliveries + 1, last_received_at = ?3 WHERE issuer = ?1 AND jti = ?2
            RETURNING id, deliveries
            """)
        markStatement = try writer.prepare(
            "INSERT INTO journal_mark (id, segment, offset) VALUES (1, ?1, ?2) ON CONFLICT (id) DO UPDATE SET segment = ?1, offset = ?2")
        begin = try writer.prepare("BEGIN IMMEDIATE")
        commitStatement = try writer.prepare("COMMIT")
        savepoint = try writer.prepare("SAVEPOINT inline")
        release = try writer.prepare("RELEASE inline")
        rollbackToSavepoint = try writer.prepare("ROLLBACK TO inline")
        reader = try database.connect(.plain)
        checkpointer = try database.connect(.plain)
        // Unowned: the threads below hold the store, so it lives as long as they do.
        syncWAL = { [unowned self] () throws(StoreError) in try self.fdatasyncWAL() }
        writerStarted = true
        // The threads hold the store until `close()` ends them: a store must be closed (its
        // owner, `SQLiteStore`, closes it when let go). They held it unowned, and a store let go
        // before they had started crashed the process ("attempted to read an unowned reference").
        OSThread.start(name: "risc.store") { [self] in writeLoop() }
        OSThread.start(name: "risc.checkpoint") { [self] in checkpointLoop() }
        OSThread.start(name: "risc.sync") { [self] in syncLoop() }
    }

    /// Queues an unlink notice (inside the caller's transaction); nothing when it is queued already.
    static func insert(_ notice: QueuedNotice, connection: SQLiteConnection) throws {
        try connection.cached(
            """
            INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, content_type, event_types, subjects, token)
            VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (issuer, jti) DO NOTHING
            """
        ).run([
            .text(notice.issuer), .text(notice.tokenID), .text(notice.claimedIssuer), .double(notice.issuedAt), .double(notice.receivedAt),
            .text(QueuedNotice.contentType), .text(JSONValue.array(notice.eventTypes.map { .string($0) }).serialized),
            .text(notice.subjectsJSON), .text(notice.token),
        ])
    }

    /// Brings the schema to `Schema.version`; the versions before and after when it changed
    /// anything. A store of a newer risc (after a rollback) is refused: this binary would not
    /// know what the newer schema means.
    @discardableResult
    static func migrate(_ connection: SQLiteConnection) throws(StoreError) -> (from: Int64, to: Int64)? {
        let found = try connection.scalar("PRAGMA user_version") ?? 0
        if found > Schema.version { throw StoreError.newerSchema(found: found, known: Schema.version, store: "the embedded store") }
        guard found < Schema.version else { return nil }
        try connection.execute("BEGIN IMMEDIATE")
        do {
            // Read again under the write lock: another process may have migrated meanwhile.
            let current = try connection.scalar("PRAGMA user_version") ?? 0
            guard current < Schema.version else {
                try connection.execute("COMMIT")
                return nil
            }
            for version in (current + 1)...Schema.version {
                if let migration = Schema.codeMigrations[version] {
                    try migration(connection)
                } else {
                    try connection.execute(Schema.migrations[version]!)
                }
            }
            try connection.execute("PRAGMA user_version = \(Schema.version)")
            try connection.execute("COMMIT")
            return (current, Schema.version)
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: EventStore

    /// Applies each newly stored SET's actions to the embedded account store inside the
    /// transaction that stores it: stored and applied commit together, with one fsync, from the
    /// writer's warm page cache. A SET whose actions fail here is rolled back to a savepoint and
    /// left `pending`, so the action worker retries it with backoff, as before. Call before the
    /// first append.
    public func enableInlineActions(table: ActionTable, log: any EventLog, tokenKey: [UInt8]) {
        let applier = EmbeddedActionApplier(connection: writer, tokenKey: tokenKey)
        condition.lock()
        inline = (applier, table, log)
        condition.unlock()
    }

    /// A reloaded action table for the SETs stored from now on (when actions are inline).
    public func updateInlineTable(_ table: ActionTable) {
        condition.lock()
        inline?.table = table
        condition.unlock()
    }

    public func append(_ record: SETRecord) async throws -> AppendOutcome {
        let (outcome, followUp) = try await appendReporting(record)
        if let log = inlineLog { for line in followUp { log.record(line) } }
        return outcome
    }

    var inlineLog: (any EventLog)? {
        condition.lock()
        defer { condition.unlock() }
        return inline?.log
    }

    public func appendReporting(_ record: SETRecord) async throws -> (outcome: AppendOutcome, followUp: [EventLogRecord]) {
        try await withCheckedThrowingContinuation { continuation in
            appendReporting(record) { continuation.resume(with: $0) }
        }
    }

    public func appendReporting(_ record: SETRecord, completion: @escaping @Sendable (StoreResult) -> Void) {
        condition.lock()
        if stopping || syncFailure != nil {
            let failure = syncFailure ?? StoreError(sqlite: SQLITE_MISUSE, "the store is closed")
            condition.unlock()
            completion(.failure(failure))
            return
        }
        // The writer waits for work only while no batch of its own awaits an fsync (the syncer
        // wakes it when that one is taken): a signal for every request woke it to sleep again.
        let wake = (pending.isEmpty && !awaitingSync) || lingering
        pending.append(Waiting(record: record, position: nil, completion: completion))
        answersWaiting += 1
        if wake { condition.signal() }
        condition.unlock()
    }

    public func journal(
        _ record: SETRecord, hop: @escaping Intake.Hop, durable: @escaping @Sendable (Result<Void, StoreError>) -> Void,
        indexed: @escaping @Sendable (StoreResult) -> Void
    ) -> Bool {
        condition.lock()
        let journal = pending.count < journalBacklog && indexFailure == nil && syncFailure == nil && !stopping ? self.journal : nil
        condition.unlock()
        guard let journal, !journal.isRefusing else { return false }
        journal.append(record, hop: hop, durable: durable, indexed: indexed) { [unowned self] records in self.enqueue(records) }
        return true
    }

    /// Hands journaled records to the writer, in journal order (under the journal's lock).
    func enqueue(_ records: [(SETRecord, SETJournal.Position, @Sendable (StoreResult) -> Void)]) -> StoreError? {
        condition.lock()
        defer { condition.unlock() }
        if stopping || syncFailure != nil { return syncFailure ?? StoreError(.closed, "the store is closed") }
        let wasEmpty = pending.isEmpty
        pending += records.map { Waiting(record: $0.0, position: $0.1, completion: $0.2) }
        let wake = (wasEmpty && !awaitingSync) || (lingering && pending.count >= indexBatchRows)
        if wake { condition.signal() }
        return nil
    }

    /// Whether acknowledgements are waiting on the writer right now (the action worker yields to
    /// them): an ordinary append waiting or being committed. Journaled SETs were answered already:
    /// a writer lingering over them (`indexLinger`) keeps nobody waiting.
    public var isBusy: Bool {
        condition.lock()
        defer { condition.unlock() }
        return answersWaiting > 0 || committingAnswers
    }

    /// Whether the writer holds records not yet stored and reported: waiting (journaled ones
    /// lingering too) or in the batch being committed. Tests wait for it before they read what
    /// the writer logs.
    public var isIndexing: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !pending.isEmpty || committing
    }

    /// Finishes every waiting append, then stops the writer. Idempotent.
    public func close() {
        condition.lock()
        let journal = self.journal
        condition.unlock()
        // No journal write after this; what was written is in `pending`, indexed below.
        journal?.refuse(StoreError(.closed, "the store is closed"))
        journal?.stop()
        condition.lock()
        stopping = true
        condition.broadcast()
        checkpointTimer.broadcast()
        while writerStarted && !(writerDone && checkpointerDone && syncerDone) { condition.wait() }
        let indexed = journalIndexed && syncFailure == nil
        self.journal = nil
        condition.unlock()
        // The last journaled batches were committed without a sync of the WAL: synced before the
        // segments holding them go.
        if indexed, let journal, (try? fdatasyncWAL()) != nil { journal.removeAll() }
        if walDescriptor >= 0 {
            Glibc.close(walDescriptor)
            walDescriptor = -1
        }
    }
}

/// A stored SET, as tests and the CLI read it back.
public struct StoredSET: Sendable {
    public let id: Int64
    public let deliveries: Int64
    public let state: String
    public let eventTypes: String
    public let token: String
    public let remoteAddress: String?
}
