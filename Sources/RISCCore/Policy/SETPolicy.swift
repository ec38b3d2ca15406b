/// What this receiver accepts: the claim rules of spec §8 steps 3–6, as values.
public struct SETPolicy: Sendable {
    /// Our OAuth client IDs: `aud` must hold one of them. Must not be empty.
    public var audiences: Set<String>
    /// The `alg` allow-list. Default: RS256 only, as Google signs. `none` and HMAC can never be added.
    public var algorithms: Set<JWSAlgorithm>
    /// Further accepted `iss` values besides the key set's issuer (Google's three spellings need none: `issuerScope`).
    public var issuerAliases: [String]
    /// How far in the future `iat` may be before a warning is attached (never fatal).
    public var clockSkew: Double
    /// `clockSkew` unless configured: 5 minutes.
    public static let defaultClockSkew: Double = 300
    /// SSF 1.0 §4.1.1: the JWS header must carry `typ` `secevent+jwt` (Google's 2018 dialect may omit it).
    public var requiresType = false

    public init(
        audiences: Set<String>, algorithms: Set<JWSAlgorithm> = JWSAlgorithm.defaultAllowed,
        issuerAliases: [String] = [], clockSkew: Double = SETPolicy.defaultClockSkew
    ) {
        self.audiences = audiences
        self.algorithms = algorithms
        self.issuerAliases = issuerAliases
        self.clockSkew = clockSkew
    }

    /// Problems with the policy itself, for start-up validation.
    public var problems: [String] {
        var problems: [String] = []
        if audiences.isEmpty { problems.append("at least one audience (OAuth client ID) is required") }
        problems += audiences.sorted().compactMap { Self.claimProblem("an audience", $0) }
        if algorithms.isEmpty { problems.append("the algorithm allow-list is empty") }
        for algorithm in algorithms where algorithm.isForbidden || algorithm.family == nil {
            problems.append("algorithm '\(algorithm)' cannot be allowed (supported: \(JWSAlgorithm.supported.map(\.rawValue).joined(separator: ", ")))")
        }
        return problems
    }

    /// The problem with an issuer or audience setting (`name`) that no SET's `iss` or `aud` can
    /// say: empty, or with whitespace or a control character (a value copied with a space, or an
    /// unset variable, would have every SET refused); nil when it can be.
    public static func claimProblem(_ name: String, _ value: String) -> String? {
        guard value.isEmpty || value.unicodeScalars.contains(where: { $0.properties.isWhitespace || Printable.isUnsafe($0) }) else { return nil }
        return "\(name) must not be empty nor hold spaces or control characters, got '\(Printable.safe(value, maxBytes: 200))'"
    }

    /// Spec §1.4/§8.6: `iss` must equal the issuer, tolerating exactly one trailing `/`
    /// difference (Google's discovery says `https://accounts.google.com`, its example SET
    /// `https://accounts.google.com/`), and Google's bare `accounts.google.com` for Google's.
    public static func issuerMatches(_ claimed: String, _ expected: String) -> Bool {
        claimed == expected || issuerScope(claimed) == issuerScope(expected)
    }

    /// An issuer without one trailing `/`: the form that de-duplication and account lookups key on,
    /// so that each of Google's spellings lands together: `https://accounts.google.com/` (its
    /// example SET), `https://accounts.google.com` (its discovery document) and
    /// `accounts.google.com` (its Java sample, and what its ID tokens may carry); which one its
    /// SETs carry is open (spec §9 question 1). No other issuer's bare name becomes a URL.
    public static func issuerScope(_ issuer: String) -> String {
        let scope = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        return scope == "accounts.google.com" ? Transmitter.googleIssuer : scope
    }

    /// Checks the token's claims against this policy.
    ///
    /// - `iss` equals `issuer` or an alias → else `invalid_issuer`.
    /// - `aud` holds one of `audiences` → else `invalid_audience`.
    /// - `jti` a non-empty string, `iat` a number, no NUL in any claim → else `invalid_request`.
    /// - `typ`, when present, is `secevent+jwt` (RFC 8417 §2.3) or the generic `JWT` → else
    ///   `invalid_request`; with `requiresType` (SSF), `secevent+jwt` only.
    /// - An ID-token shape (`nonce`, or top-level `sub` with `exp`) → `invalid_request`
    ///   (RFC 8725 §3.12, spec §6.4).
    /// - `exp` never rejects: SETs describe past events (spec §1.5).
    public func validate(_ token: SecurityEventToken, header: JOSEHeader, issuer: String, now: Double) throws(SETError)
        -> [String]
    {
        switch header.type?.lowercased() {
        case "secevent+jwt", "application/secevent+jwt": break
        case nil, "jwt", "application/jwt":
            // No type, or the generic JWT, which says no more than none (RFC 7519 §5.1): whether
            // Google's header carries one, and which, is undocumented (spec §9 question 2), so
            // the claims' shape decides (events, not an ID token). SSF requires the explicit one.
            if requiresType { throw .invalidRequest("JWS header has no 'typ' secevent+jwt, which SSF requires") }
        default: throw .invalidRequest("JWS 'typ' is not secevent+jwt")
        }
        guard let claimedIssuer = token.issuer else { throw SETError(.invalidIssuer, "no 'iss' claim") }
        guard Self.issuerMatches(claimedIssuer, issuer) || issuerAliases.contains(where: { Self.issuerMatches(claimedIssuer, $0) })
        else {
            throw SETError(.invalidIssuer, "'iss' is not the configured issuer")
        }
        guard token.audience.contains(where: audiences.contains) else {
            var error = SETError(
                .invalidAudience,
                token.claims["aud"] == nil
                    ? "no 'aud' claim"
                    : token.audience.isEmpty ? "'aud' is an empty array" : "'aud' names none of our client IDs")
            // A client id is no secret, and the operator needs it; the answer to the client still
            // echoes nothing of the token.
            error.logFields["aud"] = .array(token.audience.prefix(5).map { .string(Printable.safe($0, maxBytes: 120)) })
            throw error
        }
        guard let jti = token.tokenID, !jti.isEmpty else { throw .invalidRequest("'jti' is missing or empty") }
        guard !JSONValue.object(token.claims).containsNUL else { throw .invalidRequest("a claim holds a NUL character (U+0000)") }
        guard let issuedAt = token.issuedAt else { throw .invalidRequest("'iat' is missing") }
        if token.looksLikeIDToken {
            throw .invalidRequest("claims have the shape of an ID token, not a Security Event Token")
        }
        var warnings: [String] = []
        if issuedAt > now + clockSkew {
            // Both are bounded (iat by the token's NumericDate check, the skew by configuration);
            // formatted without an integer conversion that could trap all the same.
            let ahead = (issuedAt - now).rounded(.down), skew = clockSkew.rounded(.down)
            warnings.append("iat is \(ahead.formatted0) s in the future (clock skew allowance \(skew.formatted0) s)")
        }
        return warnings
    }
}

extension Double {
    /// A whole number of seconds as text, without converting to `Int` (which traps past 2^63).
    var formatted0: String {
        abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}
