public import RISCCore

/// A key set as the cache holds it, with where it came from and how long it is good for.
public struct CachedKeySet: Sendable {
    public enum Source: String, Sendable {
        case network
        /// Loaded from the data directory at start; used until the first successful fetch.
        case persisted
        case pinned
    }

    public let keys: JWKSet
    public let issuer: String
    public let jwksURI: String
    /// The raw JWKS body, kept for persistence.
    public let body: [UInt8]
    public let etag: String?
    /// When this set was fetched or last revalidated.
    public var fetchedAt: Double
    /// When it should be fetched again.
    public var expiresAt: Double
    public var source: Source
}
