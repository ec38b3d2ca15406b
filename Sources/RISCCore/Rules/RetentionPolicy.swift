/// How long a store keeps what it received (issue 14 §3), as values every backend applies alike.
///
/// 1. A SET whose actions are **done** stays whole for `done` seconds after they were; then its
///    raw token, subjects and remote address are removed ("stripped"). What stays is the slim row:
///    issuer, `jti`, event types, times, delivery count, state, so `risc queue` still lists it and
///    a redelivery is still answered 202 as a duplicate and applied no second time.
/// 2. `duplicates` seconds after it was **received**, the slim row is deleted ("forgotten"), with
///    the record of the actions applied for it. A redelivery after that would be stored and applied
///    again, which is harmless (the ordering rule keeps an old event from undoing a newer access
///    change; ending sessions spares sessions opened after the event), but Google's retries end
///    long before: it retries "for a limited time", the spec's reading is days.
///
/// Pending SETs and dead letters are never touched (dead letters stay until `risc queue purge`).
/// Defaults: 30 days whole (the window in which an incident is typically investigated and a SET
/// re-driven with `risc replay --from-store`), 90 days as a duplicate (three times that, and
/// far past any retry window). `done` 0 keeps SETs whole forever (and then nothing is forgotten).
public struct RetentionPolicy: Sendable, Equatable {
    public var done: Double = 30 * 86_400
    public var duplicates: Double = 90 * 86_400

    public init(done: Double = 30 * 86_400, duplicates: Double = 90 * 86_400) {
        self.done = done
        self.duplicates = duplicates
    }

    public var isOn: Bool { done > 0 }

    /// SETs done before this time are stripped.
    public func stripBefore(now: Double) -> Double { now - done }

    /// Stripped SETs received before this time are forgotten.
    public func forgetBefore(now: Double) -> Double { now - duplicates }

    /// Problems with the policy itself, for start-up validation.
    public var problems: [String] {
        var problems: [String] = []
        if done < 0 { problems.append("retention.done must be 0 (keep forever) or more") }
        if isOn && duplicates < done {
            problems.append("retention.duplicates must be at least retention.done (a SET is forgotten only after it is stripped)")
        }
        if isOn && duplicates < 7 * 86_400 {
            problems.append("retention.duplicates must be at least 7 days: Google may redeliver a SET for days")
        }
        return problems
    }
}

/// What one retention pass did.
public struct RetentionPass: Sendable, Equatable {
    public var stripped = 0
    public var forgotten = 0
    public init(stripped: Int = 0, forgotten: Int = 0) {
        self.stripped = stripped
        self.forgotten = forgotten
    }
}

/// A store that applies `RetentionPolicy`.
public protocol RetentionStore: Sendable {
    /// Strips at most `batch` SETs and forgets at most `batch`, each step in its own short
    /// transaction; call again while a pass reaches `batch`.
    func retain(_ policy: RetentionPolicy, now: Double, batch: Int) async throws -> RetentionPass
}
