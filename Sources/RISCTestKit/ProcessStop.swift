public import Foundation
public import RISCCore

extension ChildProcess {
    /// Sends `signal` (none when nil), then waits up to `seconds` for the process to end; a
    /// process still running then is sent SIGKILL and waited for. Returns whether it ended within
    /// the time. Blocks its thread: call it on `BlockingPool.waits`' (`stop(signal:within:)`).
    ///
    /// Every wait of the bench, the drills and the tests for a child is bounded so: a server
    /// that ignored SIGTERM (a broken build, a drain that never ended) held `risc bench serve`
    /// and the suite without limit. `clock` (seconds) and `pause` (one wait between looks) are
    /// injected, so a test drives the deadline instead of waiting it out.
    @discardableResult
    public func stopWaiting(
        signal: Int32? = SIGTERM, within seconds: Double, clock: () -> Double = systemUptime,
        pause: () -> Void = { usleep(20_000) }
    ) -> Bool {
        if let signal, isRunning { self.signal(signal) }
        let deadline = clock() + seconds
        // `isRunning` turns false once Foundation has reaped the child and set its status; no
        // `waitUntilExit()` here, which another thread may be in for the same process (RiscBinary).
        while isRunning {
            guard clock() < deadline else {
                self.signal(SIGKILL)
                while isRunning { usleep(1_000) }
                return false
            }
            pause()
        }
        return true
    }

    /// `stopWaiting` on `BlockingPool.waits`' threads, not on one of Swift concurrency's.
    @discardableResult
    public func stop(signal: Int32? = SIGTERM, within seconds: Double) async -> Bool {
        await BlockingPool.waits.run { [self] in stopWaiting(signal: signal, within: seconds) }
    }
}
