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

/// A key found for a `kid`, and the issuer it speaks for.
public struct ResolvedKey: Sendable {
    public let key: JWK
    public let issuer: String
    public init(key: JWK, issuer: String) {
        self.key = key
        self.issuer = issuer
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
        guard let key = keys.key(for: keyID) else { throw SETError(.invalidKey, "no key with this kid in the pinned key set") }
        return ResolvedKey(key: key, issuer: issuer)
    }

    public func cachedKey(for keyID: String) -> ResolvedKey? {
        keys.key(for: keyID).map { ResolvedKey(key: $0, issuer: issuer) }
    }
}
