/// Where verification keys come from: a fetched, cached JWKS (`RISCClient.JWKSCache`) or a
/// pinned file (`StaticKeyProvider`).
public protocol KeyProvider: Sendable {
    /// The key with `kid`, with the issuer its key set belongs to.
    ///
    /// - Throws: `SETError` `.invalidKey` when the set (after whatever refresh the provider
    ///   allows) has no such key; `KeyUnavailableError` when no usable key set can be had now.
    func key(for keyID: String) async throws -> ResolvedKey

    /// The key with `kid` if the provider holds it right now, fresh, without waiting or fetching:
    /// the push endpoint's synchronous fast path. `nil` sends the caller to `key(for:)`.
    func cachedKey(for keyID: String) -> ResolvedKey?
}

extension KeyProvider {
    public func cachedKey(for keyID: String) -> ResolvedKey? { nil }
}

/// The key (or, for a repeated `kid`, the keys) found for a `kid`, and the issuer they speak for.
public struct ResolvedKey: Sendable {
    /// The first key with the `kid`.
    public let key: JWK
    /// Every key with the `kid`, `key` first.
    public let candidates: [JWK]
    public let issuer: String

    public init(key: JWK, issuer: String) {
        self.key = key
        self.candidates = [key]
        self.issuer = issuer
    }

    public init?(candidates: [JWK], issuer: String) {
        guard let first = candidates.first else { return nil }
        self.key = first
        self.candidates = candidates
        self.issuer = issuer
    }

    /// The key to verify a token signed with `algorithm`: the one candidate that fits it. When
    /// none fits, the first (so its refusal names the reason); when several fit, the `kid` is
    /// ambiguous and the token is refused (`invalid_key`).
    public func key(for algorithm: JWSAlgorithm) throws(SETError) -> JWK {
        if candidates.count == 1 { return key }
        let fitting = candidates.filter { $0.refusal(for: algorithm) == nil }
        guard fitting.count <= 1 else {
            throw SETError(.invalidKey, "the key set has \(fitting.count) keys with this kid that fit \(algorithm): ambiguous")
        }
        return fitting.first ?? key
    }
}

/// A fixed key set: `--jwks-file` and pinned offline mode. Never fetches anything.
public struct StaticKeyProvider: KeyProvider {
    public let keys: JWKSet
    public let issuer: String

    public init(keys: JWKSet, issuer: String) {
        self.keys = keys
        self.issuer = issuer
    }

    public func key(for keyID: String) throws(SETError) -> ResolvedKey {
        guard let resolved = keys.resolved(keyID, issuer: issuer) else {
            throw SETError(.invalidKey, "no key with this kid in the pinned key set")
        }
        return resolved
    }

    public func cachedKey(for keyID: String) -> ResolvedKey? {
        keys.resolved(keyID, issuer: issuer)
    }
}
