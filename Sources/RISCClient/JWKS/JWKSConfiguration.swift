/// How the issuer's keys are fetched and cached. Durations in seconds.
public struct JWKSConfiguration: Sendable {
    /// The discovery document (`issuer`, `jwks_uri`).
    public var discoveryURL: String
    /// The issuer the discovery document must name (one trailing `/` difference tolerated).
    /// Defaults to Google's when `discoveryURL` is Google's; otherwise whatever the document says.
    public var expectedIssuer: String?
    /// Hosts `jwks_uri` may point at; nil allows any host the URL policy allows.
    public var jwksHosts: [String]?
    /// Bounds on a key set's lifetime taken from `Cache-Control: max-age`.
    public var minimumTTL: Double = 300
    public var maximumTTL: Double = 86_400
    /// Lifetime when the response names none.
    public var defaultTTL: Double = 3_600
    /// How long before expiry the background refresh runs, as a share of the lifetime.
    public var refreshAheadFraction: Double = 0.2
    /// After a forced refetch for an unknown `kid`, no other until this much time has passed.
    public var unknownKeyCooldown: Double = 60
    /// How long past its expiry a key set is still served while the issuer cannot be reached.
    public var maximumStaleness: Double = 86_400
    /// After a failed fetch, lookups wait this long before trying the issuer again.
    public var failureRetryInterval: Double = 10
    /// How long the discovery document is kept before it is fetched again.
    public var discoveryTTL: Double = 6 * 3_600
    /// Per-request limits.
    public var timeout: Double = 10
    public var maxResponseBytes: Int = 512 * 1024
    /// Where the last good discovery + JWKS is kept, so a cold start during an issuer outage
    /// still verifies. nil: not persisted.
    public var persistencePath: String?

    public init(
        discoveryURL: String = DiscoveryDocument.googleURL, expectedIssuer: String? = nil, jwksHosts: [String]? = nil,
        persistencePath: String? = nil
    ) {
        self.discoveryURL = discoveryURL
        let isGoogle = discoveryURL == DiscoveryDocument.googleURL
        self.expectedIssuer = expectedIssuer ?? (isGoogle ? DiscoveryDocument.googleIssuer : nil)
        self.jwksHosts = jwksHosts ?? (isGoogle ? DiscoveryDocument.googleJWKSHosts : nil)
        self.persistencePath = persistencePath
    }

    /// Clamps a response's max-age into the configured bounds.
    func ttl(maxAge: Double?) -> Double {
        min(maximumTTL, max(minimumTTL, maxAge ?? defaultTTL))
    }

    /// Problems with the configuration, for start-up validation.
    public var problems: [String] {
        var problems: [String] = []
        if minimumTTL <= 0 || maximumTTL < minimumTTL { problems.append("JWKS TTL bounds must satisfy 0 < min ≤ max") }
        if !(0..<1).contains(refreshAheadFraction) { problems.append("refresh-ahead fraction must be in [0, 1)") }
        if unknownKeyCooldown < 0 || maximumStaleness < 0 { problems.append("cooldown and staleness must not be negative") }
        if let refusal = URLPolicy().refusal(for: discoveryURL) { problems.append("discovery URL: \(refusal)") }
        return problems
    }
}
