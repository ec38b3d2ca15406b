import RISCCore

/// The cache's decisions as a pure state machine, so they are tested with a clock value
/// rather than by waiting.
///
/// | state of the held set              | known `kid`                     | unknown `kid`                                   |
/// |------------------------------------|---------------------------------|-------------------------------------------------|
/// | none                               | fetch, then decide              | fetch, then decide                              |
/// | fresh (now < expiresAt)            | serve                           | forced refetch, unless within the cooldown¹     |
/// | expired, within maximum staleness  | refresh; on failure serve stale | forced refetch unless cooling down¹             |
/// | expired beyond maximum staleness   | refresh; on failure unavailable | refresh; on failure unavailable                 |
///
/// ¹ Within the cooldown an unknown `kid` is rejected (400) while the issuer answers, and
/// temporary (503) while it fails; either way no fetch.
struct JWKSCacheState: Sendable {
    var current: CachedKeySet?
    /// Start of the last forced refetch for an unknown `kid`.
    var lastForcedRefetch: Double?
    /// When the last fetch failed; cleared by a success.
    var lastFailure: Double?
    let unknownKeyCooldown: Double
    let maximumStaleness: Double
    /// After a failed fetch, lookups do not start another for this long.
    let failureRetryInterval: Double

    enum Decision: Equatable {
        case serve
        /// Past expiry, the last refresh failed recently, within the maximum staleness.
        case serveStale
        /// Past expiry: refresh first.
        case refresh
        /// The `kid` is unknown and the cooldown allows one forced refetch.
        case forcedRefetch
        /// The `kid` is unknown and a successful refetch happened within the cooldown.
        case rejectUnknownKey
        /// No key set is held, or it is too stale, and the issuer failed recently.
        case unavailable
        /// No key set is held at all.
        case fetch
    }

    func decide(keyID: String, now: Double) -> Decision {
        guard let current else { return failedRecently(now: now) ? .unavailable : .fetch }
        let usable = isUsable(now: now)
        guard current.keys.key(for: keyID) != nil else {
            // One forced refetch per cooldown, whether or not the issuer is failing: a flood of
            // made-up kids during an outage costs no more fetches than one without.
            if let last = lastForcedRefetch, !hasPassed(unknownKeyCooldown, since: last, now: now) {
                // An unknown kid during an issuer outage may be a rotation we cannot see: temporary.
                return lastFailure == nil && usable ? .rejectUnknownKey : .unavailable
            }
            return failedRecently(now: now) ? .unavailable : .forcedRefetch
        }
        if now < current.expiresAt { return .serve }
        if failedRecently(now: now) { return usable ? .serveStale : .unavailable }
        return .refresh
    }

    /// What to answer without fetching again, after this lookup already fetched or waited for a fetch.
    func resolveWithoutFetching(keyID: String, now: Double) -> Decision {
        guard let current, isUsable(now: now) else { return .unavailable }
        guard current.keys.key(for: keyID) != nil else { return lastFailure == nil ? .rejectUnknownKey : .unavailable }
        return now < current.expiresAt ? .serve : .serveStale
    }

    func failedRecently(now: Double) -> Bool {
        guard let lastFailure else { return false }
        return !hasPassed(failureRetryInterval, since: lastFailure, now: now)
    }

    /// Whether the held set may still be served: not past expiry by more than the maximum staleness.
    func isUsable(now: Double) -> Bool {
        guard let current else { return false }
        return now <= current.expiresAt + maximumStaleness
    }
}
