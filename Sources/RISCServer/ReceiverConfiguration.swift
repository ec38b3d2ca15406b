public import Logging
public import RISCClient
public import RISCCore
public import RISCStorage

#if canImport(Glibc)
import Glibc
#endif

/// Everything `risc serve` needs, with the embedded defaults. Read from a config file, the
/// environment and flags by the executable (`ReceiverConfiguration+ConfigReader.swift`).
public struct ReceiverConfiguration: Sendable {
    /// Our OAuth client IDs (`aud`). Required.
    public var audiences: [String] = []
    /// The issuer the discovery document must name; defaults to Google's with Google's document.
    public var issuer: String?
    public var issuerAliases: [String] = []
    public var algorithms: [String] = ["RS256"]
    public var discoveryURL: String = DiscoveryDocument.googleURL
    /// A pinned JWK Set file instead of discovery (offline, tests).
    public var jwksFile: String?
    public var dataDirectory: String = "./data"

    /// A listener's address; an IPv6 address given in brackets (`[::1]`, as URLs write it) is
    /// kept without them, which is what binding takes.
    public var host: String = "0.0.0.0" { didSet { host = Self.unbracketed(host) } }
    public var port: Int = 8443
    public var eventsPath: String = "/events"
    /// PEM certificate chain and private key for HTTPS. Both or neither; without them risc
    /// serves plain HTTP, for deployments behind a TLS-terminating proxy.
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var adminHost: String = "127.0.0.1" { didSet { adminHost = Self.unbracketed(adminHost) } }
    public var adminPort: Int = 9090
    /// `admin.tls.*`: HTTPS on the admin listener and the account API's (TLS 1.2+, reloaded on
    /// SIGHUP); with a client CA, clients must present a certificate it issued (mutual TLS).
    public var adminTLSCertificate: String?
    public var adminTLSKey: String?
    public var adminTLSClientCA: String?
    /// `admin.api.*`: the account API on a listener of its own; nil port: it shares the admin
    /// listener with health and metrics.
    public var adminAPIHost: String = "127.0.0.1" { didSet { adminAPIHost = Self.unbracketed(adminAPIHost) } }
    public var adminAPIPort: Int?
    /// Connections the admin listener serves at once; more wait (in the kernel's backlog) until
    /// one closes.
    public var adminMaxConnections: Int = 64
    /// Seconds a request may take to arrive whole on the admin listener, counted as on the public one.
    public var adminRequestTimeout: Double = 30
    /// Admin connections one client address (an IPv6 /64) may hold; more are closed on accept. 0: no cap.
    public var adminMaxConnectionsPerAddress: Int = 8
    /// Seconds a new admin connection has for its TLS handshake and the first byte of a request.
    public var adminHandshakeTimeout: Double = 5
    /// `accept_insecure_permissions`: start although the data directory or a key file belongs to
    /// another user or is open to group or others (refused by default).
    public var acceptInsecurePermissions = false
    public var maxBodyBytes: Int = 64 * 1024
    /// Peers (reverse proxies) whose `X-Forwarded-For` names the client; off when empty.
    public var trustedProxies: [String] = []
    /// Refused requests an address may send a minute before it is answered 429; 0 turns it off.
    public var invalidPerMinute: Int = 0
    /// Connections the public listener holds open at once; one more is closed as soon as it is
    /// accepted (Google retries). Bounded further by the process's file-descriptor limit.
    public var maxConnections: Int = 1_024
    /// Connections one peer address (an IPv6 peer's /64) may hold on the public listener (0: no
    /// such limit; trusted proxies exempt). The default keeps one host from taking more than a
    /// small share of `maxConnections`, so slots remain for Google whoever else connects.
    public var maxConnectionsPerAddress: Int = 32
    /// Seconds a request may take to arrive whole on the public listener, counted from the
    /// connection's previous answer (or its opening); an idle keep-alive connection closes after
    /// as long.
    public var requestTimeout: Double = 60
    /// `limits.drain_timeout`: seconds a stop waits for requests in flight (below systemd's
    /// `TimeoutStopSec`, 30 in the shipped unit, and Docker's stop timeout, 10 by default).
    public var drainTimeout: Double = 20
    /// Seconds in `Retry-After` on 503.
    public var retryAfter: Int = 30
    /// Also write the event log to standard output.
    public var eventLogToStandardOutput: Bool = false
    /// The event log's name in its genesis line (`event_log_id`; nil: the host name): one per
    /// receiver, so each of several keeps a chain of its own.
    public var eventLogID: String?
    /// The Ed25519 key (`risc keys checkpoint-key`) that signs the event log's checkpoints
    /// (`event_log_checkpoint_key`; nil: no checkpoints), outside the data directory.
    public var eventLogCheckpointKey: String?
    /// Seconds between checkpoints (`event_log_checkpoint_interval`), at most 60.
    public var eventLogCheckpointInterval: Double = 60
    /// Where each checkpoint is also POSTed as it is made (`event_log_checkpoint_url`), off the box.
    public var eventLogCheckpointURL: String?
    /// A PEM CA bundle that verifies that endpoint's certificate instead of the system's CAs
    /// (`event_log_checkpoint_ca_file`: an organisation's own CA, trusted for the witness alone).
    public var eventLogCheckpointCAFile: String?
    /// risc's own rotation of the event log into segments with signed digests: once the file holds
    /// this many bytes (`event_log_rotate_bytes`; 0: not by size) or its first line is this many
    /// seconds old (`event_log_rotate_interval`; 0: not by time). Both 0: no rotation of risc's (logrotate's).
    public var eventLogRotateBytes: Int = 0
    public var eventLogRotateInterval: Double = 0
    /// Seconds after its closing a segment's file is deleted (`event_log_retention`; 0: kept); its digest stays.
    public var eventLogRetention: Double = 0
    /// Whether event log lines are chained (`event_log_chain`): off only to measure what the chain
    /// costs (`risc bench serve --chain-cost`); without it there are no checkpoints nor segments.
    public var eventLogChain = true
    /// The release and commit `risc_build_info` reports (set by the command, not a setting).
    public var build: (version: String, commit: String) = ("unknown", "unknown")
    /// `log.level`: the diagnostic log's level (start, stop and recoveries are `notice`).
    public var logLevel: Logger.Level = .notice
    /// `log.format`: text or JSON lines on standard error.
    public var logFormat: DiagnosticLogFormat = .text
    public var clockSkew: Double = SETPolicy.defaultClockSkew

    public var jwksMinimumTTL: Double = 300
    public var jwksMaximumTTL: Double = 86_400
    public var jwksUnknownKeyCooldown: Double = 60
    public var jwksMaximumStaleness: Double = 86_400
    public var jwksFailureRetryInterval: Double = 10

    /// The site's revocation endpoint: when set, actions are POSTed there instead of applied to
    /// the embedded store.
    public var webhookURL: String?
    /// File holding the webhook's shared HMAC secret (at least 16 bytes).
    public var webhookSecretFile: String?
    /// A PEM CA bundle that verifies the webhook's certificate instead of the system's CAs (a
    /// site's own CA, trusted for the webhook alone).
    public var webhookCAFile: String?
    public var webhookTimeout: Double = 10
    /// `all`: every SET's plan goes to the webhook; `rows`: only events whose row names the action
    /// `webhook`, the rest applied to risc's own accounts.
    public var webhookScope = WebhookScope.all
    /// Whether risc applies actions to its own accounts: without a webhook, or when rows choose it.
    public var appliesToAccounts: Bool { webhookURL == nil || webhookScope == .rows }
    /// App Flip checks (`POST /admin/linking/app-flip`): the client id the site registered for
    /// Google; nil turns the endpoint off. Extra redirect hosts and bundle ids beyond Google's.
    public var linkingGoogleClientID: String?
    public var linkingAppFlipHosts: [String] = []
    public var linkingAppFlipBundleIDs: [String] = []
    /// The RFC 7009 token revocation endpoint Google calls when a user unlinks on Google's side
    /// (`linking.revocation_path`, on the public listener); nil: not served. Needs
    /// `linkingGoogleClientID` and the secret the site issued to Google (`linking.client_secret_file`).
    public var linkingRevocationPath: String?
    public var linkingClientSecretFile: String?
    /// Token types the endpoint revokes (`linking.revocation_token_types`).
    public var linkingRevocationTokenTypes: [String] = ["access_token", "refresh_token"]
    /// Unlink notices to Google (`linking.notices.*`, issue 15 §3); off without an issuer. The
    /// issuer is the site's URL: the public listener serves its discovery document and JWKS under
    /// it. Keys in `noticeKeyDirectory` (`risc keys rotate`), the bearer from the service-account key.
    public var noticeIssuer: String?
    public var noticeKeyDirectory: String?
    public var noticeAudience = UnlinkNotices.defaultAudience
    public var noticeTokenType = "refresh_token"
    public var noticeServiceAccountFile: String?
    public var noticePublisher = GoogleNoticePublisher.Settings()

    /// What queues notices, given the store's token key; nil when notices are off.
    public func unlinkNotices(tokenKey: [UInt8]) -> UnlinkNotices? {
        noticeIssuer.map { UnlinkNotices(issuer: $0, audience: noticeAudience, tokenType: noticeTokenType, tokenKey: tokenKey) }
    }

    /// The token-fingerprint key's file (`risc keys token-key --out FILE`); nil: `DATA_DIR/token-key`.
    public var tokenKeyFile: String?
    /// `store.*`: which store (`store.url` parsed as it is read: nil, the embedded SQLite store in
    /// the data directory) and how to reach it.
    public var store = StoreSettings()
    /// `store.lease`: seconds a claim on queued work holds before another receiver may rescue it.
    public var queueLease: Double = 60
    /// File holding the bearer token for the admin account API; without it the API is off.
    public var adminTokenFile: String?

    /// Transmitters beside Google (`transmitters.NAME.*`); Google itself is the top-level
    /// `issuer`, `audiences`, `discovery_url` and `jwks_file`.
    public var transmitters: [TransmitterSettings] = []
    /// What each event does (overridable per type and reason, and per transmitter).
    public var actionTable: ActionTable = .default
    /// Backoff and dead-lettering for failed actions.
    public var retry = RetryPolicy()
    /// How long SETs are kept whole, and as duplicates (`RetentionPolicy`).
    public var retention = RetentionPolicy()
    /// Seconds between retention passes (the first runs this long after start, at most a minute).
    public var retentionInterval: Double = 600
    /// Seconds between the store's health samples, which `/readyz` and `/metrics` answer from.
    public var healthSampleInterval: Double = 1

    public init() {}

    var noticeProblems: [String] {
        guard let issuer = noticeIssuer else {
            return noticeKeyDirectory == nil && noticeServiceAccountFile == nil
                ? [] : ["linking.notices.key_dir and service_account_file need linking.notices.issuer (the site's issuer URL)"]
        }
        var problems: [String] = []
        if let refusal = URLPolicy().refusal(for: issuer) { problems.append("linking.notices.issuer: \(refusal)") }
        if issuer.hasSuffix("/") || issuer.contains("?") || issuer.contains("#") {
            problems.append("linking.notices.issuer must not end with '/' nor carry a query or fragment, got '\(issuer)'")
        }
        let paths = [UnlinkNotices.discoveryURL(issuer: issuer), UnlinkNotices.jwksURL(issuer: issuer)].map(UnlinkNotices.path(of:))
        if paths.contains(eventsPath) || paths.contains(linkingRevocationPath ?? "") {
            problems.append("linking.notices.issuer: its discovery document and JWKS paths must differ from events_path and linking.revocation_path")
        }
        if noticeKeyDirectory == nil { problems.append("linking.notices.issuer needs linking.notices.key_dir (`risc keys rotate --dir DIR`)") }
        if noticeServiceAccountFile == nil {
            problems.append("linking.notices.issuer needs linking.notices.service_account_file (the service-account key `risc stream` uses)")
        }
        if noticeAudience.isEmpty { problems.append("linking.notices.audience must not be empty") }
        if !UnlinkNotices.tokenTypes.contains(noticeTokenType) {
            problems.append("linking.notices.token_type must be access_token or refresh_token, got '\(noticeTokenType)'")
        }
        if let refusal = URLPolicy().refusal(for: noticePublisher.endpoint) { problems.append("linking.notices.endpoint: \(refusal)") }
        if noticePublisher.jsonField.isEmpty { problems.append("linking.notices.json_field must not be empty") }
        if !(1...120).contains(noticePublisher.timeout) { problems.append("linking.notices.timeout must be 1–120 seconds, got \(noticePublisher.timeout)") }
        return problems
    }

    /// The action table as the store and the workers apply it: `actionTable`'s rows, with each
    /// configured issuer alias (Google's `issuer_aliases`, a transmitter's) naming its issuer, so
    /// a subject that names an alias finds the accounts linked under the issuer.
    public var appliedTable: ActionTable {
        var table = actionTable
        table.alias(issuerAliases, to: issuer ?? Transmitter.googleIssuer)
        for transmitter in transmitters { table.alias(transmitter.issuerAliases, to: transmitter.issuer) }
        return table
    }

    public var policy: SETPolicy {
        SETPolicy(
            audiences: Set(audiences), algorithms: Set(algorithms.map(JWSAlgorithm.init(rawValue:))),
            issuerAliases: issuerAliases, clockSkew: clockSkew)
    }

    public var jwksConfiguration: JWKSConfiguration {
        var configuration = JWKSConfiguration(discoveryURL: discoveryURL, expectedIssuer: issuer)
        configuration.minimumTTL = jwksMinimumTTL
        configuration.maximumTTL = jwksMaximumTTL
        configuration.unknownKeyCooldown = jwksUnknownKeyCooldown
        configuration.maximumStaleness = jwksMaximumStaleness
        configuration.failureRetryInterval = jwksFailureRetryInterval
        return configuration
    }

    /// The listeners that serve HTTPS and their files: `public` (`tls.*`) and `admin` (`admin.tls.*`,
    /// the admin listener and the account API's), each with its settings' prefix.
    public var tlsPairs: [(listener: String, setting: String, certificate: String, key: String, clientCA: String?)] {
        var pairs: [(listener: String, setting: String, certificate: String, key: String, clientCA: String?)] = []
        if let certificate = tlsCertificate, let key = tlsKey { pairs.append(("public", "tls", certificate, key, nil)) }
        if let certificate = adminTLSCertificate, let key = adminTLSKey { pairs.append(("admin", "admin.tls", certificate, key, adminTLSClientCA)) }
        return pairs
    }

    /// Why `path` can never be a request's path: not starting with '/', or holding what a
    /// request's path cannot (a query, a fragment, white space, bytes outside printable ASCII),
    /// so every request to it would be answered 404.
    static func pathProblem(_ key: String, _ path: String) -> String? {
        if !path.hasPrefix("/") { return "\(key) must start with '/', got '\(Printable.safe(path, maxBytes: 100))'" }
        guard path.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }) else {
            return "\(key) must be a path of printable ASCII without '?', '#' or spaces, got '\(Printable.safe(path, maxBytes: 100))'"
        }
        return nil
    }

    /// `host` without the brackets of a bracketed IPv6 address.
    static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") && host.contains(":") ? String(host.dropFirst().dropLast()) : host
    }

    /// Why `host` cannot be a listener's address: neither an IPv4 or IPv6 address nor a host name
    /// (letters, digits, hyphens and underscores, which container names use, in dot-separated
    /// labels). Binding to it would fail at the start with a resolver
    /// error (exit 1, which a unit restarts), not a configuration problem.
    static func hostProblem(_ key: String, _ host: String) -> String? {
        var address = [UInt8](repeating: 0, count: 16)  // room for either family's address
        let bare = unbracketed(host)
        if inet_pton(AF_INET, bare, &address) == 1 || inet_pton(AF_INET6, bare, &address) == 1 { return nil }
        let labels = (host.hasSuffix(".") ? String(host.dropLast()) : host).split(separator: ".", omittingEmptySubsequences: false)
        // Digits alone in every label (`1.2.3.4.5`) are no IPv4 address, and no name either: a
        // top-level label is never all digits (RFC 3696 §2).
        let isName =
            !host.isEmpty && host.utf8.count <= 253 && !(labels.last ?? "").allSatisfy(\.isNumber)
            && labels.allSatisfy { label in
                (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                    && label.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0 & ~0x20) }
            }
        return isName ? nil : "\(key) must be an IP address or a host name, got '\(Printable.safe(host, maxBytes: 100))'"
    }

    /// Whether two listeners on one port would take the same address: the same host, or either
    /// the wildcard (0.0.0.0 and :: take every address, 127.0.0.1 among them).
    static func overlap(_ one: String, _ other: String) -> Bool {
        let wildcards: Set = ["0.0.0.0", "::", "[::]", "*", ""]
        return one == other || wildcards.contains(one) || wildcards.contains(other)
    }

    /// Every problem, each a sentence naming the setting; empty when the configuration is usable.
    public var problems: [String] {
        var problems = hasGoogle ? policy.problems.map { "audiences, algorithms: \($0)" } : []
        if jwksFile == nil { problems += jwksConfiguration.problems.map { "jwks: \($0)" } }
        let identifiers = [("issuer", issuer), ("linking.google_client_id", linkingGoogleClientID)].compactMap { key, value in value.map { (key, $0) } }
        problems += (identifiers + issuerAliases.map { ("issuer_aliases", $0) }).compactMap(SETPolicy.claimProblem)
        problems += transmitterProblems
        if !(0...65_535).contains(port) { problems.append("listen.port must be 0–65535, got \(port)") }
        if !(0...65_535).contains(adminPort) { problems.append("admin.port must be 0–65535, got \(adminPort)") }
        if port != 0 && port == adminPort && Self.overlap(host, adminHost) { problems.append("listen.port and admin.port must differ") }
        if let problem = Self.pathProblem("events_path", eventsPath) { problems.append(problem) }
        for (key, value) in [("listen.host", host), ("admin.host", adminHost)] + (adminAPIPort == nil ? [] : [("admin.api.host", adminAPIHost)]) {
            if let problem = Self.hostProblem(key, value) { problems.append(problem) }
        }
        if (tlsCertificate == nil) != (tlsKey == nil) { problems.append("tls.certificate and tls.key go together") }
        if (adminTLSCertificate == nil) != (adminTLSKey == nil) { problems.append("admin.tls.certificate and admin.tls.key go together") }
        if adminTLSClientCA != nil && adminTLSCertificate == nil { problems.append("admin.tls.client_ca needs admin.tls.certificate and admin.tls.key") }
        if let apiPort = adminAPIPort {
            if !(0...65_535).contains(apiPort) { problems.append("admin.api.port must be 0–65535, got \(apiPort)") }
            if adminTokenFile == nil { problems.append("admin.api.port needs admin.token_file (the account API is off without a token)") }
            if apiPort != 0 && ((apiPort == adminPort && Self.overlap(adminAPIHost, adminHost)) || (apiPort == port && Self.overlap(adminAPIHost, host))) {
                problems.append("admin.api.port must differ from admin.port and listen.port")
            }
        }
        if maxBodyBytes < 1_024 || maxBodyBytes > 1 << 20 { problems.append("max_body_bytes must be 1 KiB–1 MiB") }
        if retryAfter < 1 { problems.append("retry_after must be at least 1 second") }
        if clockSkew < 0 { problems.append("clock_skew must be 0 or more seconds, got \(clockSkew)") }
        if invalidPerMinute < 0 { problems.append("limits.invalid_per_minute must be 0 (off) or more") }
        if !(1...3_600).contains(requestTimeout) { problems.append("limits.request_timeout must be 1–3600 seconds, got \(requestTimeout)") }
        if !(0...600).contains(drainTimeout) { problems.append("limits.drain_timeout must be 0–600 seconds, got \(drainTimeout)") }
        if !(1...1_000_000).contains(maxConnections) { problems.append("limits.max_connections must be 1–1000000, got \(maxConnections)") }
        if !(1...10_000).contains(adminMaxConnections) { problems.append("admin.max_connections must be 1–10000, got \(adminMaxConnections)") }
        if !(1...3_600).contains(adminRequestTimeout) { problems.append("admin.request_timeout must be 1–3600 seconds, got \(adminRequestTimeout)") }
        if adminMaxConnectionsPerAddress < 0 { problems.append("admin.max_connections_per_address must be 0 (off) or more, got \(adminMaxConnectionsPerAddress)") }
        if !(0.1...3_600).contains(adminHandshakeTimeout) { problems.append("admin.handshake_timeout must be 0.1–3600 seconds, got \(adminHandshakeTimeout)") }
        if maxConnectionsPerAddress < 0 { problems.append("limits.max_connections_per_address must be 0 (off) or more, got \(maxConnectionsPerAddress)") }
        if dataDirectory.isEmpty { problems.append("data_dir must not be empty") }
        problems += TrustedProxies.problems(trustedProxies)
        if (webhookURL == nil) != (webhookSecretFile == nil) { problems.append("webhook.url and webhook.secret_file go together") }
        if webhookURL == nil, webhookCAFile != nil { problems.append("webhook.ca_file needs webhook.url") }
        if let url = webhookURL, let refusal = URLPolicy().refusal(for: url) { problems.append("webhook.url: \(refusal)") }
        if !(webhookTimeout > 0 && webhookTimeout <= 3_600) {
            problems.append("webhook.timeout must be more than 0 and at most 3600 seconds, got \(webhookTimeout)")
        }
        for (key, seconds) in [
            ("jwks.min_ttl", jwksMinimumTTL), ("jwks.max_ttl", jwksMaximumTTL), ("jwks.unknown_kid_cooldown", jwksUnknownKeyCooldown),
            ("jwks.max_staleness", jwksMaximumStaleness), ("jwks.failure_retry", jwksFailureRetryInterval),
        ] where !(seconds <= 30 * 86_400) {
            problems.append("\(key) must be at most 30 days (2592000 seconds), got \(seconds)")
        }
        if jwksFailureRetryInterval < 0 { problems.append("jwks.failure_retry must be 0 (retry at once) or more seconds, got \(jwksFailureRetryInterval)") }
        if webhookURL == nil, webhookScope == .rows { problems.append("webhook.scope = rows needs webhook.url") }
        if webhookURL == nil, actionTable.namesWebhook {
            problems.append("a row of the action table names the action webhook, but webhook.url is not set")
        } else if webhookScope == .all, actionTable.namesWebhook {
            problems.append("a row of the action table names the action webhook: set webhook.scope = rows (with scope all every SET goes to the webhook and risc applies nothing)")
        }
        if let url = eventLogCheckpointURL {
            if let refusal = URLPolicy().refusal(for: url) { problems.append("event_log_checkpoint_url: \(refusal)") }
            if eventLogCheckpointKey == nil { problems.append("event_log_checkpoint_url needs event_log_checkpoint_key (there are no checkpoints without it)") }
        }
        if eventLogCheckpointURL == nil, eventLogCheckpointCAFile != nil { problems.append("event_log_checkpoint_ca_file needs event_log_checkpoint_url") }
        if eventLogRotateBytes < 0 || (eventLogRotateBytes > 0 && eventLogRotateBytes < 4096) {
            problems.append("event_log_rotate_bytes must be 0 (off) or at least 4096, got \(eventLogRotateBytes)")
        }
        if eventLogRotateInterval < 0 || (eventLogRotateInterval > 0 && eventLogRotateInterval < 60) {
            problems.append("event_log_rotate_interval must be 0 (off) or at least 60s, got \(eventLogRotateInterval)")
        }
        if !eventLogChain && (eventLogCheckpointKey != nil || eventLogRotateBytes > 0 || eventLogRotateInterval > 0) {
            problems.append("event_log_chain = false leaves nothing to checkpoint or rotate into segments: unset event_log_checkpoint_key and event_log_rotate_*")
        }
        if eventLogRetention < 0 { problems.append("event_log_retention must be 0 (keep) or more, got \(eventLogRetention)") }
        if eventLogRetention > 0 && eventLogRotateBytes == 0 && eventLogRotateInterval == 0 {
            problems.append("event_log_retention deletes segments risc rotated: set event_log_rotate_bytes or event_log_rotate_interval too")
        }
        if !(eventLogCheckpointInterval > 0 && eventLogCheckpointInterval <= 60) {
            problems.append("event_log_checkpoint_interval must be more than 0 and at most 60s, got \(eventLogCheckpointInterval)")
        }
        if let path = linkingRevocationPath {
            if let problem = Self.pathProblem("linking.revocation_path", path) { problems.append(problem) }
            if path == eventsPath { problems.append("linking.revocation_path must differ from events_path") }
            if linkingGoogleClientID == nil { problems.append("linking.revocation_path needs linking.google_client_id (the client id Google authenticates with)") }
            if linkingClientSecretFile == nil { problems.append("linking.revocation_path needs linking.client_secret_file (the secret the site issued to Google)") }
        }
        let unknownTypes = Set(linkingRevocationTokenTypes).subtracting(RevocationPolicy.knownTokenTypes)
        if !unknownTypes.isEmpty || linkingRevocationTokenTypes.isEmpty {
            problems.append("linking.revocation_token_types must name access_token and/or refresh_token, got '\(linkingRevocationTokenTypes.joined(separator: ","))'")
        }
        problems += noticeProblems
        problems += retry.problems
        problems += retention.problems
        problems += store.problems
        if store.url != nil {
            if tokenKeyFile == nil {
                problems.append("accounts.token_key_file is required with store.url: every receiver must fingerprint tokens with the same key (`risc keys token-key --out FILE`)")
            }
        }
        if !(1...120).contains(store.timeout) { problems.append("store.timeout must be 1–120 seconds, got \(store.timeout)") }
        if !(5...QueueWorker.longestLease).contains(queueLease) { problems.append("store.lease must be 5–3600 seconds, got \(queueLease)") }
        return problems
    }
}

/// A configuration that cannot run, with every problem named.
public struct ConfigurationError: Error, CustomStringConvertible {
    public let problems: [String]
    public init(problems: [String]) { self.problems = problems }
    public var description: String { "invalid configuration:\n" + problems.map { "  - \($0)" }.joined(separator: "\n") }
}
