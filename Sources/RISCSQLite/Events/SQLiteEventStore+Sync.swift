import CSQLite
import Foundation
import Logging
import RISCCore

/// Pipelined fsync: the WAL is fdatasynced beside the writer, and batches are answered after it.
extension SQLiteEventStore {
    /// Fsyncs the WAL, then answers every batch committed before that began. Runs beside the
    /// writer, so a batch's fsync overlaps the next batch's writing.
    func syncLoop() {
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
                if batches.contains(where: { $0.mark != nil }) { keepJournal() }
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
                if let mark = batches.lazy.compactMap(\.mark).max() { condition.withLock { journal }?.indexed(upTo: mark) }
            } catch {
                condition.lock()
                if syncFailure == nil { syncFailure = StoreError(error.code, "an fsync of the WAL failed (restart to recover): \(error)", driverCode: error.driverCode) }
                condition.unlock()
                logger.critical("fsync of the WAL failed: refusing writes until restart", metadata: ["risc.error": "\(error)"])
                condition.withLock { journal }?.refuse(error)
                if batches.contains(where: { $0.mark != nil }) { keepJournal() }
                Committed.fail(batches, error)
            }
        }
    }

    /// fdatasync of the WAL file, through a descriptor of our own (any descriptor of a file
    /// syncs its data). Reopened if the WAL was ever replaced, so a sync never misses it.
    func fdatasyncWAL() throws(StoreError) {
        var current = stat(), held = stat()
        guard stat(walPath, &current) == 0 else { throw StoreError(sqlite: SQLITE_IOERR, "cannot stat the WAL: errno \(errno)") }
        if walDescriptor < 0 || fstat(walDescriptor, &held) != 0 || held.st_ino != current.st_ino || held.st_dev != current.st_dev {
            if walDescriptor >= 0 { Glibc.close(walDescriptor) }
            walDescriptor = open(walPath, O_RDONLY | O_CLOEXEC)
            guard walDescriptor >= 0 else { throw StoreError(sqlite: SQLITE_IOERR, "cannot open the WAL: errno \(errno)") }
        }
        guard fdatasync(walDescriptor) == 0 else {
            throw StoreError(sqlite: errno == ENOSPC ? SQLITE_FULL : SQLITE_IOERR, "fdatasync of the WAL: errno \(errno)")
        }
    }
}
