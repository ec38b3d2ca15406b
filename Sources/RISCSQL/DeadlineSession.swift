public import RISCCore

/// A session whose every call gives up after `seconds` with `StoreError.timeout` (`withDeadline`),
/// for the commands on a shared store: `risc queue`, replay's selections and `stream verify`'s
/// requests waited for ever on a PostgreSQL server that stopped answering mid-command, as the
/// account commands did before `DeadlineAccounts`. Its dialect is the inner session's.
public struct DeadlineSession: SQLSession {
    public let inner: any SQLSession
    public let seconds: Double
    public let clock: @Sendable () -> Double

    public init(_ inner: any SQLSession, seconds: Double, clock: @escaping @Sendable () -> Double) {
        (self.inner, self.seconds, self.clock) = (inner, seconds, clock)
    }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        try await withDeadline(seconds, "reading the store", clock: clock) { [inner] in try await inner.rows(sql, binds) }
    }

    /// Given up, a transaction may still commit on the server after the command said it did not
    /// answer; the command's process ending closes its connections, which rolls back one that had not.
    public func transaction(steps: [SQLStep]) async throws -> [[[SQLValue]]] {
        try await withDeadline(seconds, "writing to the store", clock: clock) { [inner] in try await inner.transaction(steps: steps) }
    }

    public var requeueAssignments: String { inner.requeueAssignments }
    public var lockRows: String { inner.lockRows }
    public var wakeWorkers: String? { inner.wakeWorkers }

    public func integrityCheck() async throws -> String? {
        try await withDeadline(seconds, "checking the store", clock: clock) { [inner] in try await inner.integrityCheck() }
    }
}
