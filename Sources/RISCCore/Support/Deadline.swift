import Synchronization

extension StoreError {
    /// A call to the store that took longer than its deadline (the server unreachable, the pool
    /// waiting for a connection): a temporary failure, answered 503.
    public static func timeout(seconds: Double, what: String) -> StoreError {
        let amount = seconds.rounded() == seconds && abs(seconds) < 1e15 ? "\(Int64(seconds))" : "\(seconds)"  // 60, not 60.0
        return StoreError(.timeout, "the store did not answer within \(amount) s (\(what))")
    }
}

/// Runs `body`, giving up after `seconds` with `StoreError.timeout` (the PostgreSQL store's calls, and
/// `/readyz`'s questions to either store). While the server is unreachable
/// the pool queues requests until its connection attempts give up, which takes far longer than
/// Google's patience with one request. Unstructured on purpose: a call that does not heed
/// cancellation (a queued connection request) is cancelled and left to finish on its own, the
/// caller answered at the deadline all the same.
///
/// The deadline is read from `clock` (seconds; tests move it), looked at every `tick` seconds
/// of real time while the call runs, so the answer comes at most that much after it.
public func withDeadline<T: Sendable>(
    _ seconds: Double, _ what: String, clock: @escaping @Sendable () -> Double, tick: Double = 0.05,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>()
    let start = clock()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        race.begin(continuation)
        let timer = Task {
            await waitUntil(start + seconds, since: start, clock: clock, tick: tick)
            if !Task.isCancelled, race.settle(.failure(StoreError.timeout(seconds: seconds, what: what))) { race.cancelWork() }
        }
        race.setWork(
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                if race.settle(result) { timer.cancel() }
            })
    }
}

/// Whether `interval` seconds have passed since `instant` on a clock that may step back (the wall
/// clock): an instant more than `clockStepTolerance` ahead of `now` means the clock stepped back
/// since, and counts as long past, so that a cooldown, a period or a deadline counted from it
/// starts afresh rather than lasting as long as the step (a step forward ends them sooner: nothing
/// held). An instant just ahead is another thread's, recorded after `now` was read: not passed.
public func hasPassed(_ interval: Double, since instant: Double, now: Double) -> Bool {
    instant - now > clockStepTolerance || now - instant >= interval
}

/// How far ahead of a clock reading an instant may be before it means the clock stepped back (a
/// step smaller than this holds nothing for longer than this).
public let clockStepTolerance: Double = 1

/// Waits until `clock` reads `end` or later (seconds; tests move it instead of waiting), looking
/// at it every `tick` seconds of real time; returns early when the task is cancelled. The
/// periodic services wait their intervals and backoffs this way, as deadlines are kept.
///
/// A clock that steps back meanwhile (the wall clock, set back by NTP, a restored VM or an
/// operator) moves `end` back as far: what was left to wait is left still, where it would have
/// held every deadline, backoff and health sample for as long as the step. A step forward ends
/// the wait early (a deadline given up or a pass run sooner: nothing held). `since`: the clock's
/// reading when `end` was set, so that a step between then and this call counts too.
public func waitUntil(_ end: Double, since: Double? = nil, clock: @Sendable () -> Double, tick: Double = 0.1) async {
    var end = end
    var last = since ?? clock()
    while !Task.isCancelled {
        let now = clock()
        if now < last { end -= last - now }
        last = now
        guard end > now else { return }
        try? await Task.sleep(for: .seconds(min(end - now, tick)))
    }
}

extension Duration {
    /// The duration in seconds, for a clock that reads seconds.
    public var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}

/// The one continuation `withDeadline` resumes, by whichever of the work and the timer ends first.
private final class DeadlineRace<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, work: Task<Void, Never>?)>((nil, nil))

    func begin(_ continuation: CheckedContinuation<T, any Error>) { state.withLock { $0.continuation = continuation } }
    func setWork(_ task: Task<Void, Never>) { state.withLock { $0.work = task } }
    func cancelWork() { state.withLock { $0.work }?.cancel() }

    /// Resumes the caller with `result` unless it was resumed already; returns whether it was this call.
    func settle(_ result: Result<T, any Error>) -> Bool {
        guard
            let continuation = state.withLock({ state -> CheckedContinuation<T, any Error>? in
                defer { state.continuation = nil }
                return state.continuation
            })
        else { return false }
        continuation.resume(with: result)
        return true
    }
}
