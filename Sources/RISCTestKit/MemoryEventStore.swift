public import RISCCore
import Synchronization

/// An event store kept in memory: the `EventStore` port's contract (one record per issuer and
/// `jti`, redeliveries counted) without a disk, for tests of what sits in front of a store.
public final class MemoryEventStore: EventStore, Sendable {
    private struct Stored {
        var records: [SETRecord] = []
        var byKey: [String: (id: Int64, deliveries: Int64)] = [:]
    }
    private let stored = Mutex(Stored())

    public init() {}

    public func append(_ record: SETRecord) async throws -> AppendOutcome {
        stored.withLock { stored in
            let key = record.issuer + "\u{0}" + record.tokenID
            if let seen = stored.byKey[key] {
                stored.byKey[key] = (seen.id, seen.deliveries + 1)
                return .duplicate(id: seen.id, deliveries: seen.deliveries + 1)
            }
            stored.records.append(record)
            let id = Int64(stored.records.count)
            stored.byKey[key] = (id, 1)
            return .accepted(id: id)
        }
    }

    /// The records stored, in the order they were first appended.
    public var records: [SETRecord] { stored.withLock { $0.records } }
}
