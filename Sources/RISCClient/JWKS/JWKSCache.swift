import Foundation
public import Logging
public import RISCCore
import Synchronization

/// The issuer's signing keys, fetched from the discovery document's `jwks_uri` and cached.
///
/// See `JWKSCacheState` for the decision table. In short: `Cache-Control: max-age` (clamped)
/// sets the lifetime and `ETag` makes refreshes conditional; an unknown `kid` forces one
/// refetch per cooldown, shared by every lookup waiting at the time; when the issuer cannot be
/// reached the last good set is served up to the maximum staleness, after which lookups fail
/// as *temporary* (`KeyUnavailableError`, so the transmitter retries) rather than as
/// rejections. A fetched set with no usable key never replaces a good one. The last good
/// discovery document and JWKS are written to `persistencePath` and read back at start.
public actor JWKSCache: KeyProvider {
    public let configuration: JWKSConfiguration
    private let client: CurlHTTPClient
    private let logger: Logger
    private nonisolated let now: @Sendable () -> Double
    private var state: JWKSCacheState
    private var discovery: (document: DiscoveryDocument, fetchedAt: Double)?
    private var fetching = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// Every decision, counted.
    public private(set) var counters = JWKSCacheCounters()
    /// The last fetch failure, for health output.
    public private(set) var lastError: String?
    /// The held set while it is fresh, readable without entering the actor: the common lookup
    /// (fresh set, known kid) costs a lock instead of two executor hops.
    private nonisolated let fresh = Mutex<(keys: JWKSet, issuer: String, expiresAt: Double)?>(nil)

    /// The threads its fetches block on (`BlockingPool.receiver` unless the caller's client says otherwise).
    nonisolated var pool: BlockingPool { client.pool }

    public init(
        configuration: JWKSConfiguration, client: CurlHTTPClient = CurlHTTPClient(pool: .receiver), logger: Logger,
        now: @escaping @Sendable () -> Double = systemNow
    ) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
        self.now = now
        self.state = JWKSCacheState(
            unknownKeyCooldown: configuration.unknownKeyCooldown, maximumStaleness: configuration.maximumStaleness,
            failureRetryInterval: configuration.failureRetryInterval)
        if let persisted = Self.loadPersisted(configuration: configuration, policy: client.policy, logger: logger) {
            state.current = persisted.keySet
            discovery = (persisted.discovery, persisted.keySet.fetchedAt)
            counters.loadedFromDisk = 1
            let keySet = persisted.keySet
            fresh.withLock { $0 = (keySet.keys, keySet.issuer, keySet.expiresAt) }
        }
    }

    // MARK: KeyProvider

    public nonisolated func key(for keyID: String) async throws -> ResolvedKey {
        if let hit = cachedKey(for: keyID) { return hit }
        return try await lookup(keyID)
    }

    public nonisolated func cachedKey(for keyID: String) -> ResolvedKey? {
        fresh.withLock { snapshot -> ResolvedKey? in
            guard let snapshot, now() < snapshot.expiresAt else { return nil }
            return snapshot.keys.resolved(keyID, issuer: snapshot.issuer)
        }
    }

    private func publishFresh() {
        fresh.withLock { $0 = state.current.map { ($0.keys, $0.issuer, $0.expiresAt) } }
    }

    private func lookup(_ keyID: String) async throws -> ResolvedKey {
        var fetchedThisCall = false
        while true {
            if fetching {
                if !fetchedThisCall { counters.coalesced += 1 }
                await withCheckedContinuation { waiters.append($0) }
                fetchedThisCall = true
                continue
            }
            let time = now()
            var decision = state.decide(keyID: keyID, now: time)
            if fetchedThisCall, [.fetch, .refresh, .forcedRefetch].contains(decision) {
                decision = state.resolveWithoutFetching(keyID: keyID, now: time)
            }
            switch decision {
            case .serve:
                return try resolved(keyID)
            case .serveStale:
                counters.staleServed += 1
                logger.warning(
                    "serving a stale key set: the issuer's JWKS could not be refreshed",
                    metadata: ["risc.kid": "\(keyID)", "risc.jwks.error": "\(lastError ?? "")"])
                return try resolved(keyID)
            case .rejectUnknownKey:
                if !fetchedThisCall {
                    counters.cooldownHits += 1
                    logger.debug("unknown kid within the refetch cooldown", metadata: ["risc.kid": "\(keyID.prefix(64))"])
                }
                throw SETError(.invalidKey, "no key with this kid in the issuer's key set")
            case .unavailable:
                throw KeyUnavailableError("no usable key set from the issuer: \(lastError ?? "not fetched yet")")
            case .fetch, .refresh, .forcedRefetch:
                await refresh(forced: decision == .forcedRefetch, reason: "\(decision)")
                fetchedThisCall = true
            }
        }
    }

    private func resolved(_ keyID: String) throws -> ResolvedKey {
        guard let current = state.current, let resolved = current.keys.resolved(keyID, issuer: current.issuer) else {
            throw SETError(.invalidKey, "no key with this kid in the issuer's key set")
        }
        return resolved
    }

    // MARK: Status

    /// What `/readyz` and `risc verify --verbose` show.
    public struct Status: Sendable {
        public let usable: Bool
        public let source: CachedKeySet.Source?
        public let issuer: String?
        public let keyIDs: [String]
        /// Seconds since the set was fetched or revalidated.
        public let age: Double?
        public let expiresIn: Double?
        public let lastError: String?
        public let counters: JWKSCacheCounters
    }

    public func status() -> Status {
        let time = now()
        let current = state.current
        return Status(
            usable: state.isUsable(now: time), source: current?.source, issuer: current?.issuer,
            keyIDs: current?.keys.keyIDs ?? [], age: current.map { time - $0.fetchedAt },
            expiresIn: current.map { $0.expiresAt - time }, lastError: lastError, counters: counters)
    }

    /// Fetches now unless a fetch is in flight (start-up warm-up, tests).
    public func refreshNow() async {
        guard !fetching else { return }
        await refresh(forced: false, reason: "requested")
    }

    /// Keeps the set fresh in the background: refreshes ahead of expiry, retries after failures,
    /// each when the cache's clock says so. Returns when the surrounding task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            let reading = now()
            await waitUntil(nextRefresh(at: reading), since: reading, clock: now)
            if Task.isCancelled { return }
            if fetching {
                await withCheckedContinuation { waiters.append($0) }  // the fetch in flight decides the next time
            } else {
                await refresh(forced: false, reason: "refresh-ahead")
            }
        }
    }

    /// When the background refresher fetches next, on the cache's clock: after a failed attempt,
    /// the retry interval (at least a second) after it; after a fetch, at the configured fraction
    /// of the set's lifetime, at least a second after that fetch. From the attempts' own times, not
    /// from when it is asked, so a clock that moves meanwhile does not put it later.
    func nextRefresh(at now: Double) -> Double {
        let retry = max(1, configuration.failureRetryInterval)
        // Counted from now if the clock stepped back since (else the wait would grow by the step).
        if let failed = state.lastFailure { return min(failed, now) + retry }
        guard let current = state.current else { return now + retry }
        let lifetime = current.expiresAt - current.fetchedAt
        let fetched = min(current.fetchedAt, now)
        return max(fetched + lifetime * (1 - configuration.refreshAheadFraction), fetched + 1)
    }

    // MARK: Fetching

    private func refresh(forced: Bool, reason: String) async {
        fetching = true
        defer {
            fetching = false
            let resumed = waiters
            waiters.removeAll()
            for waiter in resumed { waiter.resume() }
        }
        let started = now()
        if forced {
            state.lastForcedRefetch = started
            counters.forcedRefetches += 1
        }
        do {
            let document = try await currentDiscovery(at: started)
            try await fetchKeys(document: document, at: started)
            if let failedSince = state.lastFailure {
                logger.notice("issuer key set fetch recovered", metadata: ["risc.jwks.last_failure": "\(Timestamp.iso8601(failedSince))"])
            }
            state.lastFailure = nil
            lastError = nil
        } catch {
            counters.fetchFailed += 1
            // An outage's first failure is a warning; the attempts after it (one every
            // jwks.failure_retry) are debug lines until the recovery's notice.
            let first = state.lastFailure == nil
            state.lastFailure = now()
            lastError = "\(error)"
            logger.log(
                level: first ? .warning : .debug, "issuer key set fetch failed",
                metadata: ["risc.jwks.reason": "\(reason)", "risc.jwks.error": "\(error)"])
        }
    }

    private func currentDiscovery(at time: Double) async throws -> DiscoveryDocument {
        if let discovery, time - discovery.fetchedAt < configuration.discoveryTTL { return discovery.document }
        do {
            let response = try await client.perform(request(configuration.discoveryURL))
            guard response.status == 200 else {
                throw FetchError(url: configuration.discoveryURL, "discovery document: HTTP \(response.status)")
            }
            let document = try DiscoveryDocument(json: response.body)
            try check(document)
            if discovery?.document != document {
                logger.info("discovery document loaded", metadata: ["risc.issuer": "\(document.issuer)", "risc.jwks_uri": "\(Redaction.url(document.jwksURI))"])
            }
            discovery = (document, time)
            return document
        } catch {
            // Keep using the last good document; the JWKS fetch decides whether keys are usable.
            guard let discovery else { throw error }
            logger.warning("discovery document refresh failed; using the last good one", metadata: ["risc.jwks.error": "\(error)"])
            return discovery.document
        }
    }

    /// Spec §8.1: pin the issuer and where its keys may come from.
    private func check(_ document: DiscoveryDocument) throws {
        try Self.check(document, configuration: configuration, policy: client.policy)
    }

    /// The same for a fetched document and for the one kept with a persisted key set.
    private static func check(_ document: DiscoveryDocument, configuration: JWKSConfiguration, policy: URLPolicy) throws {
        if let expected = configuration.expectedIssuer, !SETPolicy.issuerMatches(document.issuer, expected) {
            throw JWKError("discovery names issuer '\(document.issuer)', expected '\(expected)'")
        }
        if let refusal = policy.refusal(for: document.jwksURI) { throw JWKError("jwks_uri refused: \(refusal)") }
        if let hosts = configuration.jwksHosts, let host = URLPolicy.components(document.jwksURI)?.host,
            !hosts.contains(host)
        {
            throw JWKError("jwks_uri host \(host) is not one of \(hosts.joined(separator: ", "))")
        }
    }

    private func fetchKeys(document: DiscoveryDocument, at time: Double) async throws {
        var request = request(document.jwksURI)
        let previous = state.current
        if let previous, previous.jwksURI == document.jwksURI, let etag = previous.etag {
            request.headers.append(("If-None-Match", etag))
        }
        let response = try await client.perform(request)
        let ttl = configuration.ttl(maxAge: response.maxAge)
        if response.status == 304, var current = previous {
            current.fetchedAt = time
            current.expiresAt = time + ttl
            current.source = .network
            state.current = current
            publishFresh()
            counters.revalidated += 1
            logger.debug("key set revalidated (304)", metadata: ["risc.jwks.ttl": "\(JSONValue.number(ttl).serialized)"])
            persist(current, document: document)
            return
        }
        guard response.status == 200 else { throw FetchError(url: document.jwksURI, "JWKS: HTTP \(response.status)") }
        let keys = try JWKSet(json: response.body)
        let keySet = CachedKeySet(
            keys: keys, issuer: document.issuer, jwksURI: document.jwksURI, body: response.body,
            etag: response.header("etag"), fetchedAt: time, expiresAt: time + ttl, source: .network)
        state.current = keySet
        publishFresh()
        counters.fetched += 1
        logger.info(
            "key set fetched",
            metadata: [
                "risc.jwks.kids": "\(keys.keyIDs.joined(separator: ","))", "risc.jwks.ttl": "\(JSONValue.number(ttl).serialized)",
                "risc.jwks.skipped": "\(keys.skipped.count)",
            ])
        persist(keySet, document: document)
    }

    private func request(_ url: String) -> HTTPRequest {
        HTTPRequest(
            url: url, headers: [("Accept", "application/json")], timeout: configuration.timeout,
            connectTimeout: min(5, configuration.timeout), maxResponseBytes: configuration.maxResponseBytes)
    }

    // MARK: Persistence

    private func persist(_ keySet: CachedKeySet, document: DiscoveryDocument) {
        guard let path = configuration.persistencePath else { return }
        var object = JSONObject()
        object["v"] = 1
        object["discovery_url"] = .string(configuration.discoveryURL)
        object["issuer"] = .string(document.issuer)
        object["jwks_uri"] = .string(document.jwksURI)
        object["jwks"] = .string(String(decoding: keySet.body, as: UTF8.self))
        if let etag = keySet.etag { object["etag"] = .string(etag) }
        object["fetched_at"] = .number(keySet.fetchedAt)
        object["expires_at"] = .number(keySet.expiresAt)
        do {
            try PrivateFiles.writeAtomically(path, Array(JSONValue.object(object).serialized.utf8))
        } catch {
            logger.warning("cannot persist the key set", metadata: ["risc.path": "\(path)", "risc.error": "\(error)"])
        }
    }

    /// The key set kept in the data directory, when it came from this discovery URL and its
    /// document passes today's checks (`check`): a configuration that now pins another issuer, or
    /// no longer allows its `jwks_uri`, does not verify with it.
    private static func loadPersisted(configuration: JWKSConfiguration, policy: URLPolicy, logger: Logger) -> (
        keySet: CachedKeySet, discovery: DiscoveryDocument
    )? {
        guard let path = configuration.persistencePath, let data = PrivateFiles.read(path) else {
            return nil
        }
        do {
            let object = try JSONParser.parseObject(Array(data))
            guard object["discovery_url"]?.stringValue == configuration.discoveryURL,
                let issuer = object["issuer"]?.stringValue, let jwksURI = object["jwks_uri"]?.stringValue,
                let body = object["jwks"]?.stringValue, let fetchedAt = object["fetched_at"]?.numberValue,
                let expiresAt = object["expires_at"]?.numberValue
            else { return nil }
            try check(DiscoveryDocument(issuer: issuer, jwksURI: jwksURI), configuration: configuration, policy: policy)
            let keys = try JWKSet(json: Array(body.utf8))
            let keySet = CachedKeySet(
                keys: keys, issuer: issuer, jwksURI: jwksURI, body: Array(body.utf8), etag: object["etag"]?.stringValue,
                fetchedAt: fetchedAt, expiresAt: expiresAt, source: .persisted)
            logger.info("key set loaded from the data directory", metadata: ["risc.jwks.kids": "\(keys.keyIDs.joined(separator: ","))"])
            return (keySet, DiscoveryDocument(issuer: issuer, jwksURI: jwksURI))
        } catch {
            logger.warning("ignoring the key set kept in the data directory (unreadable, or no longer allowed)", metadata: ["risc.path": "\(path)", "risc.error": "\(error)"])
            return nil
        }
    }
}
