/// When a failed SET is tried again, and when it is given up (dead-lettered).
///
/// Delay before attempt *n + 1* after *n* failures: `base · 2^(n−1)`, capped at `maximum`, then
/// jittered by ±`jitter` (a share). With the defaults (1 s, 1 h, 10 attempts, 20 %):
///
/// | failures | 1 | 2 | 3 | 4 | 5  | 6  | 7   | 8   | 9   | 10           |
/// |----------|---|---|---|---|----|----|-----|-----|-----|--------------|
/// | delay    | 1 s | 2 s | 4 s | 8 s | 16 s | 32 s | 64 s | 128 s | 256 s | dead letter |
public struct RetryPolicy: Sendable {
    public var baseDelay: Double = 1
    public var maximumDelay: Double = 3_600
    public var maximumAttempts: Int = 10
    public var jitter: Double = 0.2

    public init() {}

    /// nil when `failures` attempts have failed and the SET goes to the dead letters.
    public func delay(afterFailures failures: Int, random: Double = Double.random(in: -1...1)) -> Double? {
        guard failures < maximumAttempts else { return nil }
        let exponent = Double(max(0, failures - 1))
        let raw = min(maximumDelay, baseDelay * pow2(exponent))
        return max(0, raw * (1 + jitter * random))
    }

    private func pow2(_ exponent: Double) -> Double {
        exponent > 60 ? .greatestFiniteMagnitude : Double(1 << Int(exponent))
    }
}
