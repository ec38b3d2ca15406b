/// When a failed SET is tried again, and when it is given up (dead-lettered).
///
/// The give-up point is **time**, not a count: a SET is retried until `window` has passed since
/// it was received (or since an operator requeued it), as a mail queue keeps a message for days.
/// A webhook or database outage of hours therefore dead-letters nothing; it costs retries, and
/// every failure is in the event log and the metrics (`risc_actions_total{outcome="failed"}`,
/// `risc_queue_retrying`), which the shipped alert rules watch.
///
/// Delay before attempt *n + 1* after *n* failures: `base · 2^(n−1)`, capped at `maximumDelay`,
/// jittered by ±`jitter` (a share), and never past the window's end: the last attempt is made
/// when the window closes, and a failure then dead-letters the SET. With the defaults (1 s,
/// 1 h, 5 days, 20 %): 1 s, 2 s, 4 s, … 34 min, then hourly, about 130 attempts in all.
/// `maximumAttempts` (0: none) adds a cap on attempts for those who want one.
public struct RetryPolicy: Sendable {
    public var baseDelay: Double = 1
    public var maximumDelay: Double = 3_600
    /// Seconds from receipt (or requeue) after which a failure dead-letters the SET.
    public var window: Double = 5 * 86_400
    /// Attempts after which a failure dead-letters the SET whatever the window (0: no cap).
    public var maximumAttempts: Int = 0
    public var jitter: Double = 0.2

    public init() {}

    /// The delay before the next attempt, or nil when the SET goes to the dead letters: after
    /// `failures` failed attempts, `age` seconds into its window.
    public func delay(afterFailures failures: Int, age: Double, random: Double = Double.random(in: -1...1)) -> Double? {
        if maximumAttempts > 0 && failures >= maximumAttempts { return nil }
        guard age < window else { return nil }
        let exponent = Double(max(0, failures - 1))
        let raw = min(maximumDelay, baseDelay * pow2(exponent))
        return min(max(0, raw * (1 + jitter * random)), window - age)
    }

    /// As `delay(afterFailures:age:)`, but nil at once for an `Unretryable` failure: no retry
    /// mends a row that is itself wrong, so it goes to the dead letters without waiting the window.
    public func delay(after error: any Error, failures: Int, age: Double) -> Double? {
        error is any Unretryable ? nil : delay(afterFailures: failures, age: age)
    }

    /// Problems with the settings (for the configuration check).
    public var problems: [String] {
        var problems: [String] = []
        if !(baseDelay > 0) { problems.append("actions.base_delay must be positive, got \(baseDelay)") }
        if maximumDelay < baseDelay { problems.append("actions.max_delay must be at least actions.base_delay") }
        if !(window > 0) { problems.append("actions.retry_window must be positive (a duration such as 5d), got \(window)") }
        if maximumAttempts < 0 { problems.append("actions.max_attempts must be 0 (no cap) or more, got \(maximumAttempts)") }
        return problems
    }

    private func pow2(_ exponent: Double) -> Double {
        exponent > 60 ? .greatestFiniteMagnitude : Double(1 << Int(exponent))
    }
}

/// A failure that no retry can mend (the row itself is wrong, such as a queued notice risc did not
/// make): `RetryPolicy` sends it to the dead letters at once.
public protocol Unretryable: Error {}
