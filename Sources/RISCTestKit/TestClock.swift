import Synchronization

/// A settable clock, for code that takes its time as `@Sendable () -> Double`: tests move it
/// instead of sleeping.
public final class TestClock: Sendable {
    private let value: Mutex<Double>
    public init(_ start: Double = 1_800_000_000) { value = Mutex(start) }
    public var now: Double { value.withLock { $0 } }
    public func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
    public var function: @Sendable () -> Double { { self.now } }
}
