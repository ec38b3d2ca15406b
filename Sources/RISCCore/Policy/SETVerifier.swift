/// Decides whether a POSTed body is a genuine Security Event Token for us.
///
/// The order follows Google's steps (spec §1.5) and RFC 8725: parse the compact JWS; refuse a
/// disallowed `alg` before any key is looked up; find the key by `kid` alone; verify the
/// signature; only then read and check the claims.
public struct SETVerifier: Sendable {
    public let policy: SETPolicy
    public let keys: any KeyProvider

    public init(policy: SETPolicy, keys: any KeyProvider) {
        self.policy = policy
        self.keys = keys
    }

    /// Verifies `body`, with surrounding whitespace trimmed.
    ///
    /// - Throws: `SETError` (the sender's fault, HTTP 400) or `KeyUnavailableError` (ours, 503).
    public func verify(_ body: some Collection<UInt8>, now: Double) async throws -> ValidatedSET {
        try await verify(Self.parse(body, policy: policy), now: now)
    }

    /// The steps after parsing: the key (fetched if the provider must), signature, claims.
    public func verify(_ jws: CompactJWS, now: Double) async throws -> ValidatedSET {
        let resolved = try await keys.key(for: jws.header.keyID ?? "")
        return try Self.check(jws, key: resolved, policy: policy, now: now)
    }

    /// What `verifyWithHeldKey` got to.
    public enum HeldKeyAttempt: Sendable {
        case verified(ValidatedSET)
        /// Parsed and allowed, but its key is not held right now: finish with `verify(_:now:)`.
        case keyNotHeld(CompactJWS)
    }

    /// As `verify`, without waiting when the key is held right now; otherwise the parsed token,
    /// so the caller finishes it (which may fetch) without parsing it again. Errors before the key
    /// lookup and after it are thrown as in `verify`.
    public func verifyWithHeldKey(_ body: some Collection<UInt8>, now: Double) throws -> HeldKeyAttempt {
        try verifyWithHeldKey(parsed: Self.structure(body), now: now)
    }

    /// As `verifyWithHeldKey(_:now:)`, for a body already split (`structure`): the steps from
    /// the algorithm allow-list on.
    public func verifyWithHeldKey(parsed jws: CompactJWS, now: Double) throws -> HeldKeyAttempt {
        try Self.admit(jws, policy: policy)
        guard let resolved = keys.cachedKey(for: jws.header.keyID ?? "") else { return .keyNotHeld(jws) }
        return .verified(try Self.check(jws, key: resolved, policy: policy, now: now))
    }

    /// Steps before the key lookup: parse and the algorithm allow-list.
    public static func parse(_ body: some Collection<UInt8>, policy: SETPolicy) throws(SETError) -> CompactJWS {
        let jws = try structure(body)
        try admit(jws, policy: policy)
        return jws
    }

    /// The body, trimmed, split into a compact JWS: no rule of any transmitter's yet.
    public static func structure(_ body: some Collection<UInt8>) throws(SETError) -> CompactJWS {
        let bytes = Array(body)
        let range = trimmedRange(bytes)
        guard !range.isEmpty else { throw .invalidRequest("empty body: expected a compact JWS") }
        return try CompactJWS(bytes: range.count == bytes.count ? bytes : Array(bytes[range]))
    }

    /// The header's rules before any key is looked up: an allowed `alg` and a `kid`.
    static func admit(_ jws: CompactJWS, policy: SETPolicy) throws(SETError) {
        try SignatureVerifier.checkAlgorithm(jws.header.algorithm, allowed: policy.algorithms)
        guard let kid = jws.header.keyID, !kid.isEmpty else {
            throw .invalidRequest("JWS header has no 'kid': the signing key cannot be selected")
        }
    }

    /// Steps after the key lookup: signature, then claims.
    public static func check(_ jws: CompactJWS, key: ResolvedKey, policy: SETPolicy, now: Double) throws(SETError)
        -> ValidatedSET
    {
        // `parse` has checked the algorithm against the allow-list.
        let verified = try SignatureVerifier.verify(jws, with: key.key(for: jws.header.algorithm))
        let token = try SecurityEventToken(payload: verified.payload)
        let warnings = try policy.validate(token, header: verified.header, issuer: key.issuer, now: now)
        return ValidatedSET(token: token, header: verified.header, keyIssuer: key.issuer, warnings: warnings)
    }

    /// The body without surrounding spaces, tabs and line breaks: what is verified and stored.
    public static func trimmedRange(_ bytes: [UInt8]) -> Range<Int> {
        var start = 0
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return start..<end
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
}
