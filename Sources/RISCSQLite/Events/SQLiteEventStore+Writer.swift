import CSQLite
import Foundation
import Logging
import RISCCore

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

    func commit(
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
    struct InlineActionsFailed: Error {}

    /// One transaction: every record stored (and, inline, applied), then COMMIT, one fsync.
    /// `guarded`: each SET's actions in a savepoint, a failure deferring only that SET; otherwise
    /// a failure throws `InlineActionsFailed` and the caller writes the batch again, guarded.
    func write(
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

    /// A new SET stored as done with its actions applied, in the batch's transaction. Guarded,
    /// in a savepoint of its own: if the actions fail, only the savepoint is undone and the SET is
    /// stored `pending` instead, for the worker to retry with backoff.
    func storeApplying(
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
        var line = EventLogRecord.applied(jti: record.tokenID, attempt: 1, time: start)
        let plan = ActionPlan.plan(for: record.claims, table: inline.table)
        line.describe(plan)
        do {
            let outcomes = try inline.applier.apply(plan, setID: id, keyIssuer: record.issuer, now: start, fresh: true)
            let verifications = try VerificationLedger.records(
                for: plan, claims: record.claims, id: id, jti: record.tokenID, compact: record.token, connection: writer)
            if guarded { try release.run() }
            line["actions"] = ActionOutcome.json(outcomes)
            line.latency = Date().timeIntervalSince1970 - start
            logRecords.append(line)
            logRecords += verifications
            return (outcome, true)
        } catch {
            guard guarded else { throw InlineActionsFailed() }
            try rollbackToSavepoint.run()
            try release.run()
            line.outcome = .deferred
            line["error"] = .string(String(describing: error).prefix(300).description)
            logRecords.append(line)
            return (try store(record, done: nil), false)
        }
    }
}
