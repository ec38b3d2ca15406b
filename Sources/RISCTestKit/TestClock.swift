import Synchronization

/// A settable clock, for code that takes its time as `@Sendable () -> Double`: tests move it
/// instead of sleeping.
public final class TestClock: Sendable {
    private let value: Mutex<Double>
    private let readCount = Atomic<Int>(0)
    public init(_ start: Double = 1_800_000_000) { value = Mutex(start) }
    public var now: Double { value.withLock { $0 } }
    public func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
    /// The clock for the code under test; each call counts as a read.
    public var function: @Sendable () -> Double {
        {
            self.readCount.add(1, ordering: .relaxed)
            return self.now
        }
    }

    /// Returns once the code under test has read the clock `count` more times (a loop that waits
    /// on it is then looking at it), or after 30 s of real time.
    public func waitForReads(_ count: Int) async {
        let target = readCount.load(ordering: .relaxed) + count
        _ = await waitWhile { readCount.load(ordering: .relaxed) < target }
    }
}
