import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How `flock` on risc's own files (the data directory's `risc.lock`, the event log) waits out a
/// holder of a moment before calling the file busy.
///
/// `flock` belongs to the open file, and a child forked by any thread of the process holding it
/// shares that until its `exec` closes it (`O_CLOEXEC`): a restart in the same process, or a new
/// receiver right after another stopped, could find the lock held by a child of its own process
/// for those few milliseconds, and refuse a directory nobody else was using. A second receiver
/// holds it for as long as it runs, far past these tries.
public struct LockWait: Sendable {
    /// Tries before the file is busy.
    public var attempts: Int
    /// Waits between two tries (a pause of 10 ms by default; tests inject their own).
    public var pause: @Sendable () -> Void

    public init(attempts: Int = 30, pause: (@Sendable () -> Void)? = nil) {
        self.attempts = max(1, attempts)
        self.pause = pause ?? { usleep(10_000) }
    }

    /// Takes `LOCK_EX` on `fd` without blocking for long: true when held, false with `errno` set
    /// (`EWOULDBLOCK`: another holder kept it through every try).
    public func lock(_ fd: Int32) -> Bool {
        for attempt in 1...attempts {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            let error = errno
            guard error == EWOULDBLOCK, attempt < attempts else {
                errno = error
                return false
            }
            pause()
        }
        return false
    }
}
