import RISCCore
import RISCTestKit
import Synchronization
import Testing

/// `withDeadline` (every PostgreSQL call of the queue and the health checks, `/readyz`'s
/// questions) gives up on the clock it is given, not on the wall clock.
@Suite("Deadlines on an injected clock")
struct DeadlineTests {
    @Test("a call that does not answer is given up when the injected clock passes its deadline, not before")
    func givesUpOnTheClock() async throws {
        let clock = TestClock()
        let call = CallWatch { try await withDeadline(30, "a question", clock: clock.function, tick: 0.01) { try await Self.never() } }
        let (early, answer) = await call.passDeadline(30, on: clock)
        #expect(!early, "given up before its deadline on the clock")
        guard case .failure(let error as StoreError) = answer else {
            Issue.record("not given up within 20 s of real time after its deadline on the injected clock")
            call.task.cancel()
            return
        }
        #expect(error.code == .timeout)
        #expect(error.description.contains("within 30 s (a question)"))
    }

    @Test("the wall clock stepping back an hour mid-call (NTP, a restored VM) does not add an hour to the deadline")
    func clockSteppedBack() async throws {
        let clock = TestClock()
        let answered = Atomic<Bool>(false)
        let call = Task {
            _ = try? await withDeadline(30, "a question", clock: clock.function, tick: 0.01) { try await Self.never() }
            answered.store(true, ordering: .relaxed)
        }
        defer { call.cancel() }
        // Each move once the deadline's timer is looking (on a loaded machine it may start late).
        await clock.waitForReads(3)
        clock.advance(10)
        await clock.waitForReads(2)
        clock.advance(-3_600)
        await clock.waitForReads(2)
        clock.advance(19.8)
        await clock.waitForReads(2)
        let early = answered.load(ordering: .relaxed)
        #expect(!early, "given up before its 30 s")
        clock.advance(0.4)
        #expect(await waitWhile(upTo: 10) { !answered.load(ordering: .relaxed) }, "still waiting an hour after its 30 s")
    }

    @Test("an instant recorded a moment after `now` was read (another thread) is no step back: its period has not passed")
    func instantJustAfterNow() {
        // A SET queued just after the commit watch read the clock is not past its deadline.
        #expect(!hasPassed(5, since: 1_000.000_2, now: 1_000))
        #expect(!hasPassed(5, since: 1_000.9, now: 1_000))
        #expect(hasPassed(5, since: 1_005, now: 1_010))
        // The clock stepped back an hour since the instant: the period starts afresh.
        #expect(hasPassed(5, since: 4_600, now: 1_000))
    }

    @Test("a call that answers in time gives its answer, and its error as it is")
    func answersInTime() async throws {
        let clock = TestClock()
        #expect(try await withDeadline(1, "a question", clock: clock.function) { 42 } == 42)
        let error = await #expect(throws: StoreError.self) {
            try await withDeadline(1, "a question", clock: clock.function) { () async throws -> Int in throw StoreError(.refused, "no") }
        }
        #expect(error?.code == .refused)
    }

    /// Waits until cancelled, as a query to a server that went away does.
    static func never() async throws -> Int {
        try await Task.sleep(for: .seconds(3600))
        return 0
    }
}
