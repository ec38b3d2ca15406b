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
    /// A child that sleeps and, when `ignoring`, ignores SIGTERM, as such a server did (an ignored
    /// signal stays ignored across exec). It says "ready" once set, and is returned only then: a
    /// `ChildProcess` starts with no signal blocked, so a SIGTERM sent sooner would end it before
    /// it ignores the signal. Perl is in Debian's essential set.
    private func sleeper(ignoring: Bool) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/perl")
        process.arguments = ["-e", "\(ignoring ? "$SIG{TERM} = 'IGNORE'; " : "")$| = 1; print \"ready\\n\"; exec 'sleep', '300'"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        var said = Data()
        while !said.contains(UInt8(ascii: "\n")) {
            let more = out.fileHandleForReading.availableData
            if more.isEmpty { break }
            said.append(more)
        }
        return process
    }

    @Test("a child that ignores SIGTERM is killed once the injected clock passes the deadline", .timeLimit(.minutes(1)))
    func killedAfterDeadline() async throws {
        let process = try sleeper(ignoring: true)
        defer { if process.isRunning { process.signal(SIGKILL) } }
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
        defer { if process.isRunning { process.signal(SIGKILL) } }
        let clock = TestClock(0)
        // The clock never moves: only the child's end can stop the wait.
        let stopped = await BlockingPool.waits.run { [process] in
            process.stopWaiting(signal: SIGTERM, within: 30, clock: clock.function) { usleep(10_000) }
        }
        #expect(stopped)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGTERM)
    }
}
