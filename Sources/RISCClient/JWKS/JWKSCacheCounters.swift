/// Every cache decision, counted (exported as metrics by `risc serve`).
public struct JWKSCacheCounters: Sendable, Equatable {
    /// A new key set was fetched (HTTP 200 with a usable set).
    public var fetched = 0
    /// The issuer answered 304 Not Modified to a conditional request.
    public var revalidated = 0
    /// A refetch forced by an unknown `kid`.
    public var forcedRefetches = 0
    /// An unknown `kid` refused without a fetch because of the cooldown.
    public var cooldownHits = 0
    /// A lookup served from a set past its expiry because a refresh failed.
    public var staleServed = 0
    /// A fetch (discovery or JWKS) that failed or returned an unusable set.
    public var fetchFailed = 0
    /// Lookups that waited for a fetch already in flight instead of starting their own.
    public var coalesced = 0
    /// A key set loaded from the data directory at start.
    public var loadedFromDisk = 0

    public init() {}

    /// Name/value pairs, for metrics and logs.
    public var all: [(String, Int)] {
        [
            ("fetched", fetched), ("revalidated", revalidated), ("forced_refetch", forcedRefetches),
            ("cooldown_hit", cooldownHits), ("stale_served", staleServed), ("fetch_failed", fetchFailed),
            ("coalesced", coalesced), ("loaded_from_disk", loadedFromDisk),
        ]
    }
}
