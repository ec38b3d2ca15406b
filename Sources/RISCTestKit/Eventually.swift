import Synchronization

/// Waits, polling every `interval` seconds, while `condition` holds, for at most `seconds` of
/// polling (default 30: far longer than anything takes on a quiet machine, so a loaded one passes
/// too; a condition met early returns at once). Returns whether it stopped holding. For end-to-end
/// tests that wait for a real process or socket to catch up; time rules themselves are tested on
/// an injected clock (`TestClock`).
///
/// The bound counts polls (`seconds / interval` of them), not the time between them: when every
/// suite starts at once, two cores' cooperative threads are shared by hundreds of tests for the
/// first half-minute (a test of milliseconds then finishes 28–35 s after it started), and a wait on
/// the wall clock gave up on its first look after such a wait, before the work it waited for had run.
public func waitWhile(upTo seconds: Double = 30, every interval: Double = 0.02, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let polls = max(1, Int((seconds / interval).rounded(.up)))
    for _ in 0..<polls {
        guard try await condition() else { return true }
        try? await Task.sleep(for: .milliseconds(Int64(interval * 1_000)))
    }
    return !(try await condition())
}

/// A call started in a task of its own, and what it answered (nil while it has not): for a test
/// that watches a call which may never answer (awaiting it would hang the test with it).
public final class CallWatch<T: Sendable>: Sendable {
    /// The task the call runs in (cancel it if the call is left waiting).
    public let task: Task<Void, Never>
    private let answered: Answer

    public init(_ call: @escaping @Sendable () async throws -> T) {
        let answered = Answer()
        task = Task {
            let result: Result<T, any Error>
            do { result = .success(try await call()) } catch { result = .failure(error) }
            answered.state.withLock { $0 = result }
        }
        self.answered = answered
    }

    /// What the call answered; nil while it has not.
    public var answer: Result<T, any Error>? { answered.state.withLock { $0 } }

    /// For a call with a deadline of `seconds` on `clock`: moves the clock to 0.1 s short of it,
    /// then 0.1 s past it, each once the deadline's timer is reading the clock (on a loaded machine
    /// it may start late). Whether the call had answered before its deadline, and its answer after
    /// (nil: still none 20 s of real time later).
    public func passDeadline(_ seconds: Double, on clock: TestClock) async -> (early: Bool, answer: Result<T, any Error>?) {
        await clock.waitForReads(2)
        clock.advance(seconds - 0.1)
        await clock.waitForReads(2)
        let early = answer != nil
        clock.advance(0.2)
        _ = await waitWhile(upTo: 20) { answer == nil }
        return (early, answer)
    }

    private final class Answer: Sendable {
        let state = Mutex<Result<T, any Error>?>(nil)
    }
}
