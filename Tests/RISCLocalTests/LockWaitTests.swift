import Foundation
import RISCCore
import Synchronization
import Testing

@testable import RISCLocal

#if canImport(Glibc)
import Glibc
import RISCTestKit
#endif

/// CI found a receiver restarted in the same process refused its own data: "the event log … is
/// being written by another risc process". A child forked by another thread (a test's `psql`)
/// shared the log's open file, and so its `flock`, until its `exec`. The lock is tried again for
/// a moment before the file is called busy; a holder that keeps it is still refused.
@Suite("Locks on risc's own files: a holder of a moment is waited out")
struct LockWaitTests {
    let directory: String

    init() throws {
        directory = Scratch.root.appendingPathComponent("risc-lockwait-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// An open file of `path` holding `LOCK_EX`, as the forked child's copy would. Tried for up to
    /// two seconds: the race this suite is about is this test process's too. A child that another
    /// test forks holds a copy of every open file until its `exec`, and CI found one holding the
    /// event log that this suite had just closed, so the lock was refused to the holder itself.
    static func holder(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        var tries = 1
        while flock(fd, LOCK_EX | LOCK_NB) != 0 && tries < 200 {
            tries += 1
            usleep(10_000)
        }
        try #require(flock(fd, LOCK_EX | LOCK_NB) == 0)
        return fd
    }

    final class Count: Sendable {
        let value = Mutex(0)
        func add() -> Int {
            value.withLock {
                $0 += 1; return $0
            }
        }
        var now: Int { value.withLock { $0 } }
    }

    /// A wait whose first pause lets `fd` go (its `exec`), and counts its pauses. Later pauses
    /// wait 10 ms, up to two seconds: a child another test forked while `fd` was open holds a copy
    /// of it (and its lock) until its own `exec` (CI on 34b4608 refused the log after five pauses of
    /// no time at all).
    static func releasing(_ fd: Int32, pauses: Count) -> LockWait {
        LockWait(attempts: 200) { if pauses.add() == 1 { close(fd) } else { usleep(10_000) } }
    }

    @Test("the event log: opened once the holder lets go; refused (Busy) while it holds on")
    func eventLog() throws {
        let path = directory + "/events.log"
        let pauses = Count()
        let log = try JSONLinesEventLog(path: path, lockWait: Self.releasing(try Self.holder(path), pauses: pauses))
        log.record(EventLogRecord(step: .serve, outcome: .started, time: 1))
        log.close()
        #expect(pauses.now >= 1)  // refused while held, opened once let go (a forked copy may hold it a moment more)

        let kept = try Self.holder(path)
        defer { close(kept) }
        let tries = Count()
        #expect(throws: JSONLinesEventLog.Busy.self) {
            try JSONLinesEventLog(path: path, lockWait: LockWait(attempts: 4) { _ = tries.add() })
        }
        #expect(tries.now == 3)  // paused between four tries, then refused
    }

    @Test("the suite's own holder waits out a copy held for a moment (another test's child before its exec)")
    func holderWaitsOutAMoment() throws {
        let path = directory + "/moment"
        let copy = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(copy >= 0 && flock(copy, LOCK_EX | LOCK_NB) == 0)
        Thread.detachNewThread {
            usleep(100_000)
            close(copy)
        }
        close(try Self.holder(path))
    }

    @Test("the data directory: taken once the holder lets go; refused, naming the directory, while it holds on")
    func dataDirectory() throws {
        let pauses = Count()
        let lock = try DataDirectoryLock(directory: directory, wait: Self.releasing(try Self.holder(directory + "/risc.lock"), pauses: pauses))
        lock.release()
        #expect(pauses.now >= 1)  // refused while held, taken once let go (a forked copy may hold it a moment more)

        let kept = try Self.holder(directory + "/risc.lock")
        defer { close(kept) }
        #expect {
            try DataDirectoryLock(directory: directory, wait: LockWait(attempts: 2) {})
        } throws: { error in
            "\(error)".contains("the data directory \(directory) is in use by another risc serve")
        }
    }
}
