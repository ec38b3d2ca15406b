import Foundation
import RISCCore
import Synchronization

/// An optional per-address limit on invalid requests (`limits.invalid_per_minute`): each address
/// has a bucket of that many tokens, refilled evenly over a minute; every refused request (400,
/// 413) takes one. While an address's bucket is empty, everything it sends is answered 429 with
/// `Retry-After`, before any parsing or verification. Valid SETs never take tokens.
///
/// Addresses are grouped as the connection caps group them (`AddressGroup`: an IPv6 client by
/// its /64), so rotating through a /64 earns no fresh allowance.
///
/// Memory is bounded: at most `maximumAddresses` buckets; when full, buckets that have refilled
/// completely (the same as no bucket) are dropped, and if none has, the oldest-updated one.
final class InvalidRequestLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: Double
        var lastLogged: Double = 0
        var limitedSinceLog = 0
    }

    let capacity: Double
    let perSecond: Double
    let maximumAddresses: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    init(perMinute: Int, maximumAddresses: Int = 10_000) {
        capacity = Double(perMinute)
        perSecond = Double(perMinute) / 60
        self.maximumAddresses = maximumAddresses
    }

    /// The bucket refilled for the time since it was last updated; none if the clock stepped back
    /// (it would have emptied the bucket for as long as the step).
    private func refilled(_ bucket: Bucket, now: Double) -> Bucket {
        var bucket = bucket
        bucket.tokens = min(capacity, bucket.tokens + max(0, now - bucket.updated) * perSecond)
        bucket.updated = now
        return bucket
    }

    /// Whether `address` is limited now; if so, seconds until it may send again, and whether
    /// this is the first limited request of its second (to log one line a second, not thousands).
    func check(_ address: String, now: Double) -> (retryAfter: Int, log: Int?)? {
        let address = AddressGroup.key(text: address)
        return buckets.withLock { buckets in
            guard let stored = buckets[address] else { return nil }
            var bucket = refilled(stored, now: now)
            guard bucket.tokens < 1 else {
                buckets[address] = bucket
                return nil
            }
            bucket.limitedSinceLog += 1
            var log: Int?
            if hasPassed(1, since: bucket.lastLogged, now: now) {
                log = bucket.limitedSinceLog
                bucket.limitedSinceLog = 0
                bucket.lastLogged = now
            }
            buckets[address] = bucket
            return (Int(((1 - bucket.tokens) / perSecond).rounded(.up)), log)
        }
    }

    /// Takes a token for a refused request from `address`.
    func recordInvalid(_ address: String, now: Double) {
        let address = AddressGroup.key(text: address)
        buckets.withLock { buckets in
            var bucket = buckets[address].map { refilled($0, now: now) } ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = max(0, bucket.tokens - 1)
            if buckets[address] == nil && buckets.count >= maximumAddresses { evict(&buckets, now: now) }
            buckets[address] = bucket
        }
    }

    private func evict(_ buckets: inout [String: Bucket], now: Double) {
        let full = buckets.filter { refilled($0.value, now: now).tokens >= capacity }.map(\.key)
        if full.isEmpty, let oldest = buckets.min(by: { $0.value.updated < $1.value.updated })?.key {
            buckets[oldest] = nil
        } else {
            for key in full { buckets[key] = nil }
        }
    }
}
