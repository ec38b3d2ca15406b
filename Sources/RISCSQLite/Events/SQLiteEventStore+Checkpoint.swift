import CSQLite
import Foundation
import Logging
import RISCCore

/// Checkpointing: the WAL is copied back into the database file off the writer's path.
extension SQLiteEventStore {
    /// The writer's share of a checkpoint: the last few frames, so it completes (`checkpointLoop`).
    func finishWALCheckpoint() {
        writer.writeLock.lock()
        do { try writer.execute("PRAGMA wal_checkpoint(PASSIVE)") } catch {
            logger.warning("WAL checkpoint failed", metadata: ["risc.error": "\(error)"])
        }
        writer.writeLock.unlock()
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
    func checkpointLoop() {
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
}
