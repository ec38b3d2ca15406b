import Synchronization

/// Named leases in the store, so that work only one receiver may do at a time (polling one SSF
/// stream) is done by exactly one of several sharing a store, and taken over by another within a
/// lease period when its holder dies.
public protocol LeaseStore: Sendable {
    /// Takes or renews `name` for `owner` until `now + seconds`: true when `owner` holds it now
    /// (it was free, expired, or already `owner`'s), false while another's is live.
    func hold(_ name: String, owner: String, for seconds: Double, now: Double) async throws -> Bool
    /// Gives `name` up, if `owner` holds it.
    func release(_ name: String, owner: String) async throws
}

/// Leases in memory: the embedded store's (its data-directory lock already makes one process the
/// only holder), and tests'.
public final class LocalLeases: LeaseStore {
    private let leases = Mutex<[String: (owner: String, until: Double)]>([:])

    public init() {}

    public func hold(_ name: String, owner: String, for seconds: Double, now: Double) async throws -> Bool {
        leases.withLock { leases in
            if let held = leases[name], held.owner != owner, held.until > now { return false }
            leases[name] = (owner, now + seconds)
            return true
        }
    }

    public func release(_ name: String, owner: String) async throws {
        leases.withLock { leases in if leases[name]?.owner == owner { leases[name] = nil } }
    }
}
