public import RISCCore
public import Synchronization

/// An event log kept in memory, for tests that read what a worker or an endpoint logged.
public final class MemoryEventLog: EventLog, Sendable {
    public let lines = Mutex<[JSONObject]>([])

    public init() {}

    public func record(_ record: EventLogRecord) { lines.withLock { $0.append(record.fields) } }

    /// The `outcome`s of the lines of `step`, in order.
    public func outcomes(_ step: String) -> [String] {
        lines.withLock { $0.filter { $0["step"]?.stringValue == step }.compactMap { $0["outcome"]?.stringValue } }
    }

    /// The lines of `step`, in order.
    public func records(_ step: String) -> [JSONObject] {
        lines.withLock { $0.filter { $0["step"]?.stringValue == step } }
    }
}
