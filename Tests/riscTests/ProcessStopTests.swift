import Foundation
import RISCCore
import RISCTestKit
import Synchronization
import Testing

/// The bench, the drills and the tests wait for their child processes with a bound
/// (`Process.stopWaiting`): `risc bench serve` used to wait without limit for a server that
/// ignored SIGTERM (found with a broken experimental build that never finished its drain).
@Suite("stopping a child process: bounded, killed when it ignores the signal")
struct ProcessStopTests {
    /// A child that sleeps with SIGTERM unblocked (a test process blocks it on its threads, and a
    /// child inherits the mask: a plain `sleep` would never see the signal) and, when `ignoring`,
    /// ignored, as such a server did (an ignored signal stays ignored across exec). Perl is in
    /// Debian's essential set.
    private func sleeper(ignoring: Bool) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/perl")
        process.arguments = [
            // Ignored before it is unblocked, so a SIGTERM already pending is discarded, not delivered.
            "-e", "use POSIX; \(ignoring ? "$SIG{TERM} = 'IGNORE'; " : "")sigprocmask(SIG_UNBLOCK, POSIX::SigSet->new(SIGTERM)); exec 'sleep', '300'",
        ]
        try process.run()
        return process
    }

    @Test("a child that ignores SIGTERM is killed once the injected clock passes the deadline", .timeLimit(.minutes(1)))
    func killedAfterDeadline() async throws {
        let process = try sleeper(ignoring: true)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let clock = TestClock(0)
        let looks = Atomic(0)
        let stopped = await BlockingPool.waits.run { [process] in
            process.stopWaiting(signal: SIGTERM, within: 30, clock: clock.function) {
                // Each look at the child moves the clock by a second, and lets the shell take its signal.
                looks.add(1, ordering: .relaxed)
                clock.advance(1)
                usleep(10_000)
            }
        }
        #expect(!stopped)
        #expect(!process.isRunning)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)
        #expect(looks.load(ordering: .relaxed) == 30)
    }

    @Test("a child that ends on SIGTERM is waited for, not killed", .timeLimit(.minutes(1)))
    func endsOnSignal() async throws {
        let process = try sleeper(ignoring: false)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let clock = TestClock(0)
        // The clock never moves: only the child's end can stop the wait.
        let stopped = await BlockingPool.waits.run { [process] in
            process.stopWaiting(signal: SIGTERM, within: 30, clock: clock.function) { usleep(10_000) }
        }
        #expect(stopped)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGTERM)
    }
}
