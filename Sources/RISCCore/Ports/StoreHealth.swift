/// What `/readyz` and `/metrics` read from the store, whichever backend it is. Asynchronous, as a
/// database server answers; the embedded store's synchronous methods satisfy it.
public protocol StoreHealth: Sendable {
    /// Whether the store takes writes now (an embedded store refuses them after a failed fsync
    /// until a restart; a database server may be unreachable).
    func isWritable() async -> Bool
    /// `isWritable`, with why not when it is not (`/readyz` says it); a store that has not taken
    /// a write within `seconds` is reported unwritable (a probe must answer while the server is away).
    func writability(within seconds: Double) async -> (writable: Bool, reason: String?)
    /// SETs acknowledged and not yet processed.
    func queueDepth() async throws -> Int
    /// Dead letters: SETs whose actions failed every attempt.
    func deadLetters() async throws -> Int
    /// Pending SETs whose actions failed at least once and wait for their next attempt.
    func retrying() async throws -> Int
    /// When the oldest SET still waiting for its actions arrived, if any.
    func oldestPendingReceivedAt() async throws -> Double?
    /// When the newest SET arrived, if any.
    func lastReceivedAt() async throws -> Double?
    /// Transactions committed and rows written since start (group commit).
    var writeCounts: (commits: Int, rows: Int) { get }
    /// The five questions above at once, as a health sample asks them; `queueCounts: false` and
    /// `deadLetters: false` leave those counts out (nil: a long queue is counted less often). A
    /// database server answers them in one statement on one connection; the default asks each
    /// question, an unanswered one nil.
    func figures(queueCounts: Bool, deadLetters: Bool) async throws -> StoreFigures
}

/// What a health sample reads from the store. nil: not asked, or no answer; for the two times,
/// `.some(nil)` is "none".
public struct StoreFigures: Sendable, Equatable {
    public var queueDepth: Int?, deadLetters: Int?, retrying: Int?
    public var oldestPendingReceivedAt: Double??, lastReceivedAt: Double??

    public init(
        queueDepth: Int? = nil, deadLetters: Int? = nil, retrying: Int? = nil, oldestPendingReceivedAt: Double?? = nil,
        lastReceivedAt: Double?? = nil
    ) {
        (self.queueDepth, self.deadLetters, self.retrying) = (queueDepth, deadLetters, retrying)
        (self.oldestPendingReceivedAt, self.lastReceivedAt) = (oldestPendingReceivedAt, lastReceivedAt)
    }
}

extension StoreHealth {
    /// Within the 2 s a readiness probe waits.
    public func writability() async -> (writable: Bool, reason: String?) { await writability(within: 2) }

    public func writability(within seconds: Double) async -> (writable: Bool, reason: String?) {
        await isWritable() ? (true, nil) : (false, "the store refuses writes (see the log)")
    }

    public func figures(queueCounts: Bool, deadLetters: Bool) async throws -> StoreFigures {
        var figures = StoreFigures()
        if queueCounts {
            figures.queueDepth = try? await queueDepth()
            figures.retrying = try? await retrying()
        }
        if deadLetters { figures.deadLetters = try? await self.deadLetters() }
        // Not `try?`, which would flatten "none" into "no answer".
        do { figures.oldestPendingReceivedAt = .some(try await oldestPendingReceivedAt()) } catch {}
        do { figures.lastReceivedAt = .some(try await lastReceivedAt()) } catch {}
        return figures
    }
}
