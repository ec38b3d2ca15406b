import Foundation
import RISCCore

/// A lock held by a thread of its own until `release()`: how a test holds up the code that needs
/// that lock (a store's writer) while it looks at what goes on without it.
public final class HeldOnThread: Sendable {
    private let released = DispatchSemaphore(value: 0)

    /// Returns once `lock` has run on the new thread; `unlock` runs there at `release()`.
    public init(lock: @escaping @Sendable () -> Void, unlock: @escaping @Sendable () -> Void) async {
        let (held, released) = (DispatchSemaphore(value: 0), released)
        Thread.detachNewThread {
            lock()
            held.signal()
            released.wait()
            unlock()
        }
        await BlockingPool.shared.run { held.wait() }
    }

    public func release() { released.signal() }
}
