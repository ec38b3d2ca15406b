/// What `/readyz` and `/metrics` read from the store, whichever backend it is.
public protocol StoreHealth: Sendable {
    /// Whether the store takes writes now (an embedded store refuses them after a failed fsync
    /// until a restart; a database server may be unreachable).
    func isWritable() -> Bool
    /// SETs acknowledged and not yet processed.
    func queueDepth() throws -> Int
    /// Dead letters: SETs whose actions failed every attempt.
    func deadLetters() throws -> Int
    /// When the oldest SET still waiting for its actions arrived, if any.
    func oldestPendingReceivedAt() throws -> Double?
    /// When the newest SET arrived, if any.
    func lastReceivedAt() throws -> Double?
    /// Transactions committed and rows written since start (group commit).
    var writeCounts: (commits: Int, rows: Int) { get }
}
