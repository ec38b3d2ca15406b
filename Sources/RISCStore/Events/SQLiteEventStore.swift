import CSQLite
import Foundation
import Logging
import RISCCore

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
public final class SQLiteEventStore: EventStore, StoreHealth, @unchecked Sendable {
    public let path: String
    private let logger: Logger
    private let maxBatch: Int
    private let condition = NSCondition()
    private var pending: [(SETRecord, @Sendable (StoreResult) -> Void)] = []
    private var stopping = false
    private var writerDone = false
    private let readLock = NSLock()
    private let reader: SQLiteConnection
    private var writerStarted = false
    private let writer: SQLiteConnection
    private let upsert: SQLiteStatement
    private let redelivery: SQLiteStatement
    private let savepoint: SQLiteStatement
    private let begin: SQLiteStatement
    private let commitStatement: SQLiteStatement
    private let release: SQLiteStatement
    private let rollbackToSavepoint: SQLiteStatement
    private let checkpointer: SQLiteConnection
    /// The checkpointer sleeps on its own condition, so an append's signal always wakes the writer.
    private let checkpointTimer = NSCondition()
    private var checkpointerDone = false
    /// Set by the checkpointer when it has nearly caught up with the WAL: the writer then copies
    /// the last few frames itself, between two batches, so the checkpoint completes and the next
    /// transaction starts the WAL over from its beginning (see `checkpointLoop`).
    private var finishCheckpoint = false
    /// WAL frames the checkpointer lets the writer copy (a fraction of a millisecond of work).
    private static let finishFrames: Int64 = 256

    /// Committed batches waiting for the WAL fsync (`syncLoop`), with their outcomes.
    private struct Committed {
        var completions: [@Sendable (StoreResult) -> Void]
        var results: [(outcome: AppendOutcome, followUp: [EventLogRecord])]
        var queued: Int

        static func fail(_ batches: [Committed], _ error: any Error) {
            for batch in batches { for completion in batch.completions { completion(.failure(error)) } }
        }
    }
    private let syncCondition = NSCondition()
    private var unsynced: [Committed] = []
    private var syncerDone = false
    /// The writer has handed a batch to the syncer that it has not taken yet (under `condition`).
    private var awaitingSync = false
    /// Set once an fsync has failed: every later append fails.
    private var syncFailure: StoreError?
    private let walPath: String
    private var walDescriptor: Int32 = -1
    /// The sync step, replaceable by tests (to fail it); by default fdatasync of the WAL.
    var syncWAL: () throws(StoreError) -> Void = { }

    private var commits = 0
    private var rowsWritten = 0
    private var lastReceived: Double?
    private var committing = false
    /// Called on the writer thread after a commit that left work for the action worker (SETs
    /// stored pending), to wake it.
    public var afterCommit: (@Sendable () -> Void)?
    /// With the embedded account store, each new SET's actions are applied in the transaction that
    /// stores it (`enableInlineActions`); the worker then only retries what failed here.
    private var inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?

    /// Transactions committed and rows written, for metrics.
    public var writeCounts: (commits: Int, rows: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (commits, rowsWritten)
    }

    /// Opens (creating if needed) `directory/risc.sqlite3`.
    public init(directory: String, logger: Logger, maxBatch: Int = 512) throws {
        try PrivateFiles.makeDirectory(directory)
        path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        walPath = path + "-wal"
        self.logger = logger
        self.maxBatch = maxBatch
        writer = try SQLiteConnection(path: path)
        try writer.execute("PRAGMA journal_mode = WAL")
        // The writer does not sync inside COMMIT; `syncLoop` fsyncs the WAL before any answer.
        try writer.execute("PRAGMA synchronous = NORMAL")
        try writer.execute("PRAGMA foreign_keys = ON")
        try writer.execute("PRAGMA cache_size = -8192")
        // Checkpoints run on their own thread (below), never inside a commit that requests wait on.
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        try Self.migrate(writer)
        // A plain insert that does nothing on a redelivery (then `redelivery` counts it): cheaper
        // than an upsert with RETURNING, which SQLite runs through an ephemeral table.
        upsert = try writer.prepare("""
            INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, remote, content_type,
                              event_types, subjects, token, state, attempts, processed_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
            ON CONFLICT (issuer, jti) DO NOTHING
            """)
        redelivery = try writer.prepare("""
            UPDATE sets SET deliveries = deliveries + 1, last_received_at = ?3 WHERE issuer = ?1 AND jti = ?2
            RETURNING id, deliveries
            """)
        begin = try writer.prepare("BEGIN IMMEDIATE")
        commitStatement = try writer.prepare("COMMIT")
        savepoint = try writer.prepare("SAVEPOINT inline")
        release = try writer.prepare("RELEASE inline")
        rollbackToSavepoint = try writer.prepare("ROLLBACK TO inline")
        reader = try SQLiteConnection(path: path)
        checkpointer = try SQLiteConnection(path: path)
        writerStarted = true
        OSThread.start(name: "risc.store") { [unowned self] in self.writeLoop() }
        OSThread.start(name: "risc.checkpoint") { [unowned self] in self.checkpointLoop() }
        OSThread.start(name: "risc.sync") { [unowned self] in self.syncLoop() }
        syncWAL = { [unowned self] () throws(StoreError) in try self.fdatasyncWAL() }
    }

    deinit { close() }

    static func migrate(_ connection: SQLiteConnection) throws(StoreError) {
        guard try connection.scalar("PRAGMA user_version") ?? 0 < Schema.version else { return }
        try connection.execute("BEGIN IMMEDIATE")
        do {
            // Read again under the write lock: another process may have migrated meanwhile.
            let current = try connection.scalar("PRAGMA user_version") ?? 0
            for version in (current + 1)...max(current + 1, Schema.version) where version <= Schema.version {
                if let migration = Schema.codeMigrations[version] {
                    try migration(connection)
                } else {
                    try connection.execute(Schema.migrations[version]!)
                }
            }
            try connection.execute("PRAGMA user_version = \(Schema.version)")
            try connection.execute("COMMIT")
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
    public func enableInlineActions(table: ActionTable, log: any EventLog, directory: String, tokenKeyFile: String? = nil) throws {
        let applier = EmbeddedActionApplier(connection: writer, tokenKey: try AccountStore.loadKey(directory: directory, file: tokenKeyFile))
        condition.lock()
        inline = (applier, table, log)
        condition.unlock()
    }

    public func append(_ record: SETRecord) async throws -> AppendOutcome {
        let (outcome, followUp) = try await appendReporting(record)
        if let log = inlineLog { for line in followUp { log.record(line) } }
        return outcome
    }

    private var inlineLog: (any EventLog)? {
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
            let failure = syncFailure ?? StoreError(code: SQLITE_MISUSE, "the store is closed")
            condition.unlock()
            completion(.failure(failure))
            return
        }
        pending.append((record, completion))
        condition.signal()
        condition.unlock()
    }

    /// Whether acknowledgements are waiting on the writer right now (the action worker yields to them).
    public var isBusy: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !pending.isEmpty || committing
    }

    /// Finishes every waiting append, then stops the writer. Idempotent.
    public func close() {
        condition.lock()
        stopping = true
        condition.broadcast()
        checkpointTimer.broadcast()
        while writerStarted && !(writerDone && checkpointerDone && syncerDone) { condition.wait() }
        condition.unlock()
        if walDescriptor >= 0 {
            Glibc.close(walDescriptor)
            walDescriptor = -1
        }
    }

    /// Fsyncs the WAL, then answers every batch committed before that began. Runs beside the
    /// writer, so a batch's fsync overlaps the next batch's writing.
    private func syncLoop() {
        while true {
            syncCondition.lock()
            while unsynced.isEmpty && !writerDoneForSync { syncCondition.wait() }
            if unsynced.isEmpty {
                syncCondition.unlock()
                condition.lock()
                syncerDone = true
                condition.broadcast()
                condition.unlock()
                return
            }
            var batches: [Committed] = []
            swap(&batches, &unsynced)
            syncCondition.unlock()
            condition.lock()
            awaitingSync = false
            condition.signal()
            let failedBefore = syncFailure
            condition.unlock()
            if let failedBefore {  // committed after a failed fsync: never reported stored
                Committed.fail(batches, failedBefore)
                continue
            }
            do {
                try syncWAL()
                var queued = 0
                for batch in batches {
                    for (completion, result) in zip(batch.completions, batch.results) { completion(.success(result)) }
                    queued += batch.queued
                }
                if queued > 0 { afterCommit?() }
            } catch {
                condition.lock()
                if syncFailure == nil { syncFailure = StoreError(code: error.code, "an fsync of the WAL failed (restart to recover): \(error)") }
                condition.unlock()
                logger.critical("fsync of the WAL failed: refusing writes until restart", metadata: ["risc.error": "\(error)"])
                Committed.fail(batches, error)
            }
        }
    }

    /// Set (under `syncCondition`) when the writer has handed over its last batch.
    private var writerDoneForSync = false

    /// fdatasync of the WAL file, through a descriptor of our own (any descriptor of a file
    /// syncs its data). Reopened if the WAL was ever replaced, so a sync never misses it.
    func fdatasyncWAL() throws(StoreError) {
        var current = stat(), held = stat()
        guard stat(walPath, &current) == 0 else { throw StoreError(code: SQLITE_IOERR, "cannot stat the WAL: errno \(errno)") }
        if walDescriptor < 0 || fstat(walDescriptor, &held) != 0 || held.st_ino != current.st_ino || held.st_dev != current.st_dev {
            if walDescriptor >= 0 { Glibc.close(walDescriptor) }
            walDescriptor = open(walPath, O_RDONLY | O_CLOEXEC)
            guard walDescriptor >= 0 else { throw StoreError(code: SQLITE_IOERR, "cannot open the WAL: errno \(errno)") }
        }
        guard fdatasync(walDescriptor) == 0 else {
            throw StoreError(code: errno == ENOSPC ? SQLITE_FULL : SQLITE_IOERR, "fdatasync of the WAL: errno \(errno)")
        }
    }

    private func writeLoop() {
        while true {
            condition.lock()
            // A committed batch not yet taken by the syncer: wait for it (one batch waits for an
            // fsync at a time), meanwhile more requests join the next batch.
            while (pending.isEmpty || awaitingSync) && !stopping && !finishCheckpoint { condition.wait() }
            if finishCheckpoint {
                finishCheckpoint = false
                condition.unlock()
                finishWALCheckpoint()
                continue
            }
            if pending.isEmpty && stopping {
                writerDone = true
                condition.broadcast()
                condition.unlock()
                syncCondition.lock()
                writerDoneForSync = true
                syncCondition.signal()
                syncCondition.unlock()
                return
            }
            let batch = Array(pending.prefix(maxBatch))
            pending.removeFirst(batch.count)
            if let syncFailure {  // waiting since before an fsync failed: refused like later ones
                condition.unlock()
                for (_, completion) in batch { completion(.failure(syncFailure)) }
                continue
            }
            committing = true
            let inline = self.inline
            condition.unlock()
            commit(batch, inline: inline)
            condition.lock()
            committing = false
            condition.unlock()
        }
    }

    /// The writer's share of a checkpoint: the last few frames, so it completes (`checkpointLoop`).
    private func finishWALCheckpoint() {
        WriteLock.lock.lock()
        do { try writer.execute("PRAGMA wal_checkpoint(PASSIVE)") } catch {
            logger.warning("WAL checkpoint failed", metadata: ["risc.error": "\(error)"])
        }
        WriteLock.lock.unlock()
        checkpointTimer.lock()
        checkpointTimer.signal()
        checkpointTimer.unlock()
    }

    /// Copies the WAL into the database file (PASSIVE: never blocks the writer), so the WAL
    /// stays small without a commit ever paying for a whole checkpoint.
    ///
    /// Under steady load a PASSIVE checkpoint never quite finishes (the writer adds frames while
    /// it copies), and SQLite starts the WAL over only after a finished one: the file would grow
    /// without bound, and every commit would extend it (new blocks, an inode update in each
    /// fsync). So the checkpointer runs again soon while it is copying a lot, and once it is
    /// within `finishFrames` of the end it asks the writer to copy that remainder between two
    /// batches. Idle, it looks once a second.
    private func checkpointLoop() {
        var interval = 0.1
        while true {
            checkpointTimer.lock()
            _ = checkpointTimer.wait(until: Date(timeIntervalSinceNow: interval))
            checkpointTimer.unlock()
            condition.lock()
            let stop = stopping && writerDone
            let waitingForWriter = finishCheckpoint
            condition.unlock()
            if waitingForWriter && !stop { continue }
            do {
                if stop {
                    try checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                } else {
                    let statement = try checkpointer.prepare("PRAGMA wal_checkpoint(PASSIVE)")
                    defer { statement.reset() }
                    if try statement.step(), statement.int(0) == 0 {
                        let frames = statement.int(1), copied = statement.int(2)
                        interval = frames - copied > 4 * Self.finishFrames ? 0.02 : 0.1
                        if frames > Self.finishFrames && frames - copied <= Self.finishFrames {
                            condition.lock()
                            finishCheckpoint = true
                            condition.signal()
                            condition.unlock()
                        }
                    }
                }
            } catch {
                logger.warning("WAL checkpoint failed", metadata: ["risc.error": "\(error)"])
            }
            if stop {
                condition.lock()
                checkpointerDone = true
                condition.broadcast()
                condition.unlock()
                return
            }
        }
    }

    private func commit(
        _ batch: [(SETRecord, @Sendable (StoreResult) -> Void)],
        inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?
    ) {
        WriteLock.lock.lock()
        defer { WriteLock.lock.unlock() }
        let results: [(outcome: AppendOutcome, followUp: [EventLogRecord])]
        var queued = 0
        do {
            do {
                results = try write(batch.map(\.0), inline: inline, guarded: false, queued: &queued)
            } catch is InlineActionsFailed {
                // One SET's actions failed: write the batch again with each SET's actions in a
                // savepoint of its own, so that only that SET is stored pending, for the worker.
                try? writer.execute("ROLLBACK")
                queued = 0
                results = try write(batch.map(\.0), inline: inline, guarded: true, queued: &queued)
            }
            condition.lock()
            commits += 1
            rowsWritten += batch.count
            lastReceived = max(lastReceived ?? 0, batch.map(\.0.receivedAt).max() ?? 0)
            condition.unlock()
        } catch {
            upsert.reset()
            redelivery.reset()
            try? writer.execute("ROLLBACK")
            logger.error("store commit failed", metadata: ["risc.error": "\(error)", "risc.batch": "\(batch.count)"])
            for (_, completion) in batch { completion(.failure(error)) }
            return
        }
        condition.lock()
        awaitingSync = true
        condition.unlock()
        syncCondition.lock()
        unsynced.append(Committed(completions: batch.map(\.1), results: results, queued: queued))
        syncCondition.signal()
        syncCondition.unlock()
    }

    /// An inline action failed in a batch written without savepoints.
    private struct InlineActionsFailed: Error {}

    /// One transaction: every record stored (and, inline, applied), then COMMIT, one fsync.
    /// `guarded`: each SET's actions in a savepoint, a failure deferring only that SET; otherwise
    /// a failure throws `InlineActionsFailed` and the caller writes the batch again, guarded.
    private func write(
        _ records: [SETRecord], inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?, guarded: Bool,
        queued: inout Int
    ) throws -> [(outcome: AppendOutcome, followUp: [EventLogRecord])] {
        var results: [(outcome: AppendOutcome, followUp: [EventLogRecord])] = []
        results.reserveCapacity(records.count)
        try begin.run()
        for record in records {
            var lines: [EventLogRecord] = []
            let outcome: AppendOutcome
            if let inline {
                let applied: Bool
                (outcome, applied) = try storeApplying(record, inline: inline, guarded: guarded, into: &lines)
                if !applied { queued += 1 }
            } else {
                outcome = try store(record, done: nil)
                if case .accepted = outcome { queued += 1 }
            }
            results.append((outcome, lines))
        }
        try commitStatement.run()
        return results
    }

    /// Inserts `record` (as done at `done`, or pending), or counts a redelivery.
    private func store(_ record: SETRecord, done: Double?) throws -> AppendOutcome {
        try upsert.run([
            .text(record.issuer), .text(record.tokenID), .text(record.claimedIssuer), .double(record.issuedAt),
            .double(record.receivedAt), .optional(record.remoteAddress), .optional(record.contentType),
            .text(JSONValue.array(record.eventTypes.map { .string($0) }).serialized), .text(record.subjectsJSON),
            .text(record.token), .text(done == nil ? "pending" : "done"), .int(done == nil ? 0 : 1), done.map { .double($0) } ?? .null,
        ])
        if writer.changes == 1 { return .accepted(id: writer.lastInsertRowID) }
        try redelivery.bind([.text(record.issuer), .text(record.tokenID), .double(record.receivedAt)])
        defer { redelivery.reset() }
        guard try redelivery.step() else { throw StoreError(code: SQLITE_ERROR, "redelivery found no row") }
        return .duplicate(id: redelivery.int(0), deliveries: redelivery.int(1))
    }

    /// A new SET stored as done with its actions applied, in the batch's transaction. Guarded,
    /// in a savepoint of its own: if the actions fail, only the savepoint is undone and the SET is
    /// stored `pending` instead, for the worker to retry with backoff.
    private func storeApplying(
        _ record: SETRecord, inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog), guarded: Bool,
        into logRecords: inout [EventLogRecord]
    ) throws -> (outcome: AppendOutcome, applied: Bool) {
        let start = Date().timeIntervalSince1970
        if guarded { try savepoint.run() }
        let outcome = try store(record, done: start)
        guard case .accepted(let id) = outcome else {
            if guarded { try release.run() }
            return (outcome, true)
        }
        var line = EventLogRecord(step: "applied", outcome: "applied", time: start)
        line["jti"] = .string(record.tokenID)
        line["attempt"] = 1
        let plan = ActionPlan.plan(for: record.claims, table: inline.table)
        line.describe(plan)
        do {
            let outcomes = try inline.applier.apply(plan, setID: id, keyIssuer: record.issuer, now: start, fresh: true)
            let verifications = try VerificationLedger.records(
                for: plan, claims: record.claims, id: id, jti: record.tokenID, compact: record.token, connection: writer)
            if guarded { try release.run() }
            line["actions"] = EmbeddedActionApplier.json(outcomes)
            line["latency_us"] = .number(((Date().timeIntervalSince1970 - start) * 1e6).rounded())
            logRecords.append(line)
            logRecords += verifications
            return (outcome, true)
        } catch {
            guard guarded else { throw InlineActionsFailed() }
            try rollbackToSavepoint.run()
            try release.run()
            line["outcome"] = "deferred"
            line["error"] = .string(String(describing: error).prefix(300).description)
            logRecords.append(line)
            return (try store(record, done: nil), false)
        }
    }

    // MARK: Reads (a separate connection; WAL lets it run beside the writer)

    private func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        readLock.lock()
        defer { readLock.unlock() }
        return try body(reader)
    }

    /// SETs acknowledged and not yet processed.
    public func queueDepth() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets WHERE state = 'pending'") ?? 0) }
    }

    /// Dead letters: SETs whose actions failed every attempt.
    public func deadLetters() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets WHERE state = 'dead'") ?? 0) }
    }

    /// When the oldest SET still waiting for its actions arrived, if any.
    public func oldestPendingReceivedAt() throws -> Double? {
        try read { connection in
            let statement = try connection.prepare("SELECT min(received_at) FROM sets WHERE state = 'pending'")
            defer { statement.reset() }
            guard try statement.step(), !statement.isNull(0) else { return nil }
            return statement.double(0)
        }
    }

    /// Rows in the store.
    public func count() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets") ?? 0) }
    }

    /// When the newest SET arrived (seconds since the epoch), if any: kept in memory, read from
    /// the newest row at start.
    public func lastReceivedAt() throws -> Double? {
        condition.lock()
        let known = lastReceived
        condition.unlock()
        if let known { return known }
        return try read { connection in
            let statement = try connection.prepare("SELECT last_received_at FROM sets ORDER BY id DESC LIMIT 1")
            guard try statement.step(), !statement.isNull(0) else { return nil }
            return statement.double(0)
        }
    }

    /// One stored SET by issuer scope and jti, for tests and the CLI.
    public func record(issuer: String, jti: String) throws -> StoredSET? {
        try read { connection in
            let statement = try connection.prepare(
                "SELECT id, deliveries, state, event_types, token, remote FROM sets WHERE issuer = ?1 AND jti = ?2")
            try statement.bind([.text(issuer), .text(jti)])
            guard try statement.step() else { return nil }
            return StoredSET(
                id: statement.int(0), deliveries: statement.int(1), state: statement.text(2) ?? "",
                eventTypes: statement.text(3) ?? "", token: statement.text(4) ?? "", remoteAddress: statement.text(5))
        }
    }

    /// Whether a write transaction can be opened right now (readiness).
    public func isWritable() -> Bool {
        guard FileManager.default.isWritableFile(atPath: path) else { return false }
        condition.lock()
        let failed = syncFailure != nil
        condition.unlock()
        if failed { return false }
        return (try? read { connection -> Bool in
            try connection.execute("BEGIN IMMEDIATE")
            try connection.execute("ROLLBACK")
            return true
        }) ?? false
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

