import CSQLite
import Foundation
import Logging
import RISCCore
import RISCSQL

/// Group commit: the writer thread takes what waits, writes it in one transaction (applying
/// actions inline when enabled) and hands the batch to the syncer.
extension SQLiteEventStore {
    func writeLoop() {
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
            if lingerApplies {
                linger()
                // What waits is still there (only the writer takes it); a close commits it now.
                if finishCheckpoint {
                    condition.unlock()
                    continue
                }
            }
            let batch = Array(pending.prefix(maxBatch))
            pending.removeFirst(batch.count)
            let answers = batch.lazy.filter { $0.position == nil }.count
            answersWaiting -= answers
            if let syncFailure {  // waiting since before an fsync failed: refused like later ones
                condition.unlock()
                if batch.contains(where: { $0.position != nil }) { keepJournal() }
                for waiting in batch { waiting.completion(.failure(syncFailure)) }
                continue
            }
            committingAnswers = answers > 0
            committing = true
            let inline = self.inline
            condition.unlock()
            commit(batch, inline: inline)
            condition.lock()
            committingAnswers = false
            committing = false
            condition.unlock()
        }
    }

    /// Whether the writer lets journaled records gather before it indexes them (`indexLinger`):
    /// all that waits was journaled (answered already; an ordinary append waits for its own
    /// commit), fewer than `indexBatchRows` of them. Under `condition`.
    var lingerApplies: Bool {
        indexLinger > 0 && journal != nil && !stopping && !finishCheckpoint && pending.count < indexBatchRows && answersWaiting == 0
    }

    /// Waits, under `condition`, until `indexLinger` has passed on the store's clock, `indexBatchRows`
    /// journaled records wait, an ordinary append or a checkpoint's finish needs the writer, or the
    /// store closes (each of them signals). On a test's clock, in steps of `lingerStep` of real
    /// time, so that the clock is looked at again.
    func linger() {
        lingering = true
        defer { lingering = false }
        let deadline = clock() + indexLinger
        while lingerApplies {
            let left = deadline - clock()
            guard left > 0 else { return }
            _ = condition.wait(until: Date().addingTimeInterval(clockInjected ? min(left, Self.lingerStep) : left))
        }
    }

    static let lingerStep = 0.002

    func commit(
        _ batch: [Waiting],
        inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?
    ) {
        // The database's write lock (other writers: the accounts, the queue's worker, retention)
        // is held for the transaction only: not while its SETs are reported, nor while a failed
        // batch waits to be tried again.
        writer.writeLock.lock()
        let results: [(outcome: AppendOutcome, followUp: [EventLogRecord])]
        var queued = 0
        do {
            do {
                results = try write(batch, inline: inline, guarded: false, queued: &queued)
            } catch is InlineActions.Unguarded {
                // One SET's actions failed: write the batch again with each SET's actions in a
                // savepoint of its own, so that only that SET is stored pending, for the worker.
                try? writer.execute("ROLLBACK")
                queued = 0
                results = try write(batch, inline: inline, guarded: true, queued: &queued)
            }
            writer.writeLock.unlock()
            condition.lock()
            commits += 1
            rowsWritten += batch.count
            lastReceived = max(lastReceived ?? 0, batch.map(\.record.receivedAt).max() ?? 0)
            indexFailure = nil
            condition.unlock()
        } catch {
            upsert.reset()
            redelivery.reset()
            try? writer.execute("ROLLBACK")
            writer.writeLock.unlock()
            if Self.isLocked(error) {
                logger.warning(
                    "store locked by another process past the busy timeout: indexing waits; pushed SETs are still journaled",
                    metadata: ["risc.error": "\(error)", "risc.batch": "\(batch.count)"])
            } else {
                logger.error("store commit failed", metadata: ["risc.error": "\(error)", "risc.batch": "\(batch.count)"])
            }
            for waiting in batch where waiting.position == nil { waiting.completion(.failure(error)) }
            retryJournaled(batch.filter { $0.position != nil }, after: error)
            return
        }
        var mark = batch.lazy.compactMap(\.position).max()
        if let journaled = mark, batch.allSatisfy({ $0.position != nil }) {
            // Journaled only: durable already, in the journal. Reported now; the WAL is synced only
            // before a journal segment goes (or at close), not for every batch.
            for (waiting, result) in zip(batch, results) { waiting.completion(.success(result)) }
            if queued > 0 { afterCommit?() }
            let (journal, due) = condition.withLock {
                unsyncedMark = max(unsyncedMark ?? journaled, journaled)
                unsyncedRows += batch.count
                let due = unsyncedRows >= Self.journalSyncRows
                if due { unsyncedRows = 0 }
                return (self.journal, due)
            }
            // A sync of the WAL every few hundred SETs keeps each one small (one sync of all of a
            // segment's WAL at once would hold the file system's journal, and so the event loops'
            // fdatasyncs, for as long as it takes).
            guard due || journal?.hasOlderSegments ?? false else { return }
            syncCondition.lock()
            unsynced.append(Committed(completions: [], results: [], queued: 0, mark: condition.withLock { unsyncedMark }))
            syncCondition.signal()
            syncCondition.unlock()
            return
        }
        condition.lock()
        awaitingSync = true
        if let unsyncedMark { mark = max(mark ?? unsyncedMark, unsyncedMark) }
        condition.unlock()
        syncCondition.lock()
        unsynced.append(Committed(completions: batch.map(\.completion), results: results, queued: queued, mark: mark))
        syncCondition.signal()
        syncCondition.unlock()
    }

    /// One transaction: every record stored (and, inline, applied: `InlineActions`), then COMMIT,
    /// one fsync.
    func write(
        _ batch: [Waiting], inline: (applier: EmbeddedActionApplier, table: ActionTable, log: any EventLog)?, guarded: Bool,
        queued: inout Int
    ) throws -> [(outcome: AppendOutcome, followUp: [EventLogRecord])] {
        var results: [(outcome: AppendOutcome, followUp: [EventLogRecord])] = []
        results.reserveCapacity(batch.count)
        try begin.run()
        let transaction = inline.map { Inline(store: self, applier: $0.applier) }
        for record in batch.lazy.map(\.record) {
            let now = wallClock()
            let outcome = try store(record, done: inline == nil ? nil : now)
            var lines: [EventLogRecord] = []
            if case .accepted(let id) = outcome {
                if var transaction, let table = inline?.table {
                    let applied: Bool
                    (lines, applied) = try InlineActions.apply(
                        ActionPlan.plan(for: record.claims, table: table, now: now), to: record, setID: id, now: now, guarded: guarded, in: &transaction,
                        clock: wallClock)
                    if !applied { queued += 1 }
                } else {
                    queued += 1
                }
            }
            results.append((outcome, lines))
        }
        // Journal order is writer order: the last journaled record's end marks all before it stored.
        if let mark = batch.lazy.compactMap(\.position).max() { try markStatement.run([.int(mark.segment), .int(mark.offset)]) }
        try commitStatement.run()
        return results
    }

    /// Journaled records the writer could not index (their 202 went): back to the front of the
    /// queue, tried again after a second on the store's clock (looked at every 20 ms), and new
    /// SETs go the ordinary way meanwhile (answered only once stored, or 503). At close they stay
    /// in the journal, indexed at the next start. A store locked by another process past the busy
    /// timeout (an import's or a migration's long transaction) is no failure of the store's: new
    /// SETs are still journaled, durable and answered, while the writer waits its turn (up to
    /// `journalBacklog` of them waiting, as always).
    func retryJournaled(_ journaled: [Waiting], after error: any Error) {
        guard !journaled.isEmpty else { return }
        condition.lock()
        if Self.isLocked(error) {
            indexFailure = nil
        } else {
            indexFailure = StoreError(.failed, "the journal's records cannot be indexed: \(error)")
        }
        indexRetries += 1
        if stopping {
            condition.unlock()
            keepJournal()
            for waiting in journaled { waiting.completion(.failure(error)) }
            return
        }
        pending.insert(contentsOf: journaled, at: 0)
        let retry = clock() + Self.journalRetrySeconds
        while clock() < retry && !stopping { _ = condition.wait(until: Date().addingTimeInterval(0.02)) }
        condition.unlock()
    }

    static let journalRetrySeconds = 1.0

    /// Whether `error` is SQLITE_BUSY: another connection held the write lock past the busy timeout.
    static func isLocked(_ error: any Error) -> Bool { ((error as? StoreError)?.driverCode ?? 0) & 0xFF == SQLITE_BUSY }

    /// Journaled records are left unindexed (or not known stored): the journal keeps its
    /// segments for the next start.
    func keepJournal() { condition.withLock { journalIndexed = false } }

    /// Inserts `record` (as done at `done`, or pending), or counts a redelivery.
    func store(_ record: SETRecord, done: Double?) throws -> AppendOutcome {
        try upsert.run([
            .text(record.issuer), .text(record.tokenID), .text(record.claimedIssuer), .double(record.issuedAt),
            .double(record.receivedAt), .optional(record.remoteAddress), .optional(record.contentType),
            .text(JSONValue.array(record.eventTypes.map { .string($0) }).serialized), .text(record.subjectsJSON),
            .text(record.token), .text(done == nil ? "pending" : "done"), .int(done == nil ? 0 : 1), done.map { .double($0) } ?? .null,
        ])
        if writer.changes == 1 { return .accepted(id: writer.lastInsertRowID) }
        try redelivery.bind([.text(record.issuer), .text(record.tokenID), .double(record.receivedAt)])
        defer { redelivery.reset() }
        guard try redelivery.step() else { throw StoreError(sqlite: SQLITE_ERROR, "redelivery found no row") }
        return .duplicate(id: redelivery.int(0), deliveries: redelivery.int(1))
    }

    /// The writer's statements for `InlineActions`, in the batch's transaction.
    struct Inline: InlineActions.Transaction {
        let store: SQLiteEventStore
        let applier: EmbeddedActionApplier

        func savepoint() throws { try store.savepoint.run() }
        func release() throws { try store.release.run() }
        func rollbackToSavepoint() throws { try store.rollbackToSavepoint.run() }

        func apply(_ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double) throws
            -> (outcomes: [ActionOutcome], followUp: [EventLogRecord])
        {
            let outcomes = try applier.apply(plan, setID: setID, keyIssuer: record.issuer, now: now, fresh: true)
            return (
                outcomes,
                try VerificationLedger.records(
                    for: plan, claims: record.claims, id: setID, jti: record.tokenID, compact: record.token, connection: store.writer, now: now)
            )
        }

        func deferToQueue(setID: Int64) throws {
            try store.writer.cached("UPDATE sets SET state = 'pending', attempts = 0, processed_at = NULL WHERE id = ?1").run([.int(setID)])
        }
    }
}
