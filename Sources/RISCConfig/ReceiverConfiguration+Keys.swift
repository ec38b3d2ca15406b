public import Foundation
import Logging
import RISCClient
public import RISCCore
public import RISCServer
import RISCStorage

extension ReceiverConfiguration {
    /// Every key `risc serve` reads, with what it means. `docs/configuration.md`'s table is this list.
    public static let keys: [(key: String, help: String)] = [
        ("audiences", "OAuth client IDs accepted in `aud` (required; env: comma-separated)"),
        ("issuer", "issuer the discovery document must name (default: Google's, with Google's document)"),
        ("issuer_aliases", "further accepted `iss` values"),
        ("algorithms", "allowed JWS algorithms (default RS256)"),
        ("discovery_url", "RISC discovery document (default Google's)"),
        ("jwks_file", "pinned JWK Set file instead of discovery (offline)"),
        ("data_dir", "data directory: store, event log, key cache (default ./data)"),
        (
            "accept_insecure_permissions",
            "start although the data directory, the token key or a notice key belongs to another user or is open to group or others (refused, exit 64, by default; see `docs/security.md`); links in the data directory are refused whatever this says"
        ),
        ("listen.host", "public listener address (default 0.0.0.0)"),
        ("listen.port", "public listener port (default 8443)"),
        ("events_path", "path that receives SETs (default /events)"),
        (
            "trusted_proxies",
            "peer addresses or CIDR ranges (a reverse proxy: `10.0.0.7`, `10.0.0.0/8`, `2001:db8::/32`) whose `X-Forwarded-For` names the client in the log and for limits; compared as addresses (an IPv4-mapped IPv6 peer matches its IPv4 entry); a host name or typo is an error"
        ),
        (
            "limits.invalid_per_minute",
            "refused requests (400/413) an address may send per minute; then it gets `429` + `Retry-After` until its bucket refills (valid SETs take no tokens; keep it off, or generous, for Google's own addresses)"
        ),
        ("limits.request_timeout", "seconds a request may take to arrive whole, from the connection's last answer or opening; idle connections close after as long (default 60)"),
        (
            "limits.drain_timeout",
            "seconds a stop (SIGTERM) waits for requests in flight before closing their connections (0–600). Keep it below the service manager's stop timeout: the shipped unit's `TimeoutStopSec` is 30; Docker's `docker stop` waits 10 s unless given `-t` (use `-t 30`, or set this to 8)"
        ),
        ("limits.max_connections", "connections the public listener holds at once; one more is closed on accept (lowered, with a warning, if the open-file hard limit cannot fit it plus 256)"),
        ("limits.max_connections_per_address", "connections one peer address (an IPv6 peer's /64) may hold at once; one more is closed on accept (trusted proxies exempt; `0` turns it off)"),
        ("tls.certificate", "PEM certificate chain; with tls.key turns on HTTPS (TLS 1.2+)"),
        ("tls.key", "PEM private key for tls.certificate"),
        ("admin.host", "admin listener address for /healthz, /readyz, /metrics (default 127.0.0.1)"),
        ("admin.port", "admin listener port (default 9090)"),
        ("admin.token_file", "file with the bearer token for the admin account API (off without it)"),
        ("admin.tls.certificate", "PEM certificate chain; with admin.tls.key turns on HTTPS (TLS 1.2+) on the admin listener and the account API's; SIGHUP reloads it"),
        ("admin.tls.key", "PEM private key for admin.tls.certificate"),
        ("admin.tls.client_ca", "PEM CA bundle: admin clients (Prometheus, the account API's callers) must present a certificate it issued (mutual TLS; default off)"),
        ("admin.api.host", "the account API's own listener address, with admin.api.port (default 127.0.0.1)"),
        ("admin.api.port", "serve the account API (/admin/…) on a listener of its own at this port instead of beside /metrics (needs admin.token_file; default: shared)"),
        ("admin.max_connections", "connections the admin listener serves at once; more wait until one closes (default 64)"),
        ("admin.request_timeout", "seconds a request to the admin listener may take to arrive whole; idle connections close after as long (default 30)"),
        ("admin.max_connections_per_address", "admin connections one client address (IPv6: one /64) may hold at once; more are closed on accept (default 8, 0 off)"),
        ("admin.handshake_timeout", "seconds a new admin connection has for its TLS handshake and its first request byte (default 5)"),
        ("max_body_bytes", "largest accepted body; larger gets 413 (default 65536)"),
        ("retry_after", "seconds in Retry-After on 503 (default 30)"),
        ("log.level", "diagnostic log level: trace, debug, info, notice, warning, error, critical (default notice: start, stop and recoveries; --log-level wins)"),
        ("log.format", "diagnostic log format on standard error: text or json (one object per line, microsecond UTC times; default text; --log-format wins)"),
        ("event_log_stdout", "also write the event log to standard output (default false)"),
        ("clock_skew", "seconds a future iat may be ahead before a warning (default 300)"),
        ("jwks.min_ttl", "lower bound on a key set's lifetime from max-age (default 300)"),
        ("jwks.max_ttl", "upper bound on it (default 86400)"),
        ("jwks.unknown_kid_cooldown", "seconds between forced refetches for unknown kids (default 60)"),
        ("jwks.max_staleness", "seconds past expiry a key set is still served during an issuer outage (default 86400)"),
        ("jwks.failure_retry", "seconds between fetch attempts after a failure (default 10)"),
        (
            "store.url",
            "a shared PostgreSQL store for several receivers: `postgres://USER@HOST:PORT/DB`, `?sslmode=disable|require|verify-full` (TLS 1.2+; `verify-full` when not given, since issue 24: a password file is refused over TCP with anything else), `&host=/socket/dir` for a Unix socket; never a password (see `docs/operations.md` §6)"
        ),
        ("store.password_file", "file with the PostgreSQL password (never in store.url)"),
        ("store.ca_file", "PEM CA bundle that verifies the PostgreSQL server (sslmode=verify-full; default the system's)"),
        ("store.accept_unsafe_durability", "accept a PostgreSQL server with fsync or synchronous_commit off (never in production; default false)"),
        ("store.timeout", "seconds a SET may wait for the shared store's COMMIT before it is answered 503 (Google retries; default 5)"),
        (
            "store.lease",
            "seconds a receiver holds queued work it claimed before another may rescue it. With a webhook the lease is at least a claim's calls: `max(store.lease, batch × (webhook.timeout + 5) + 30)`, 150 s with the defaults (batch 8, timeout 10); unlink notices `max(store.lease, 4 × (timeout + 5) + 30)`; so a dead receiver's webhook work is rescued after up to 150 s"
        ),
        (
            "accounts.token_key_file",
            "the token-fingerprint key (`risc keys token-key --out FILE`); a store opens only with the key its fingerprints were made with; required with `store.url` (one key for every receiver)"
        ),
        ("retention.done", "how long a done SET stays whole (raw token, subjects) before they are removed; a duration such as 30d, 0 keeps them forever (default 30d)"),
        ("retention.duplicates", "how long after receipt a done SET's (issuer, `jti`) is kept to recognise redeliveries (at least 7 days and at least `retention.done`)"),
        ("webhook.url", "POST actions to this revocation endpoint instead of the embedded store"),
        ("webhook.secret_file", "file with the webhook's HMAC secret (16+ bytes)"),
        ("webhook.timeout", "seconds per webhook request (default 10)"),
        ("linking.google_client_id", "the OAuth client id the site registered for Google's account linking: turns on the admin listener's App Flip check (POST /admin/linking/app-flip)"),
        ("linking.app_flip_hosts", "redirect hosts accepted besides Google's production and sandbox ones (comma-separated)"),
        ("linking.app_flip_bundle_ids", "app bundle ids accepted besides the Google Home and Assistant apps' (comma-separated)"),
        (
            "linking.revocation_path",
            "serve the RFC 7009 token revocation endpoint Google calls on unlink at this path of the public listener (needs linking.google_client_id and linking.client_secret_file)"
        ),
        ("linking.client_secret_file", "file holding the client secret the site issued to Google (at least 16 bytes), for the revocation endpoint"),
        (
            "linking.notices.issuer",
            "send unlink notices to Google when the site revokes linked tokens: the site's issuer URL (its discovery document and JWKS are served under it on the public listener)"
        ),
        ("linking.notices.key_dir", "the notice signing keys (`risc keys rotate --dir DIR`; the same directory on every receiver)"),
        ("linking.notices.service_account_file", "the Google service-account JSON key whose token authorizes the calls (as for `risc stream`)"),
        ("linking.notices.audience", "the notices' aud (default google_account_linking; unconfirmed by Google)"),
        ("linking.notices.token_type", "token_type of a notice when the caller names none: refresh_token (default) or access_token"),
        ("linking.notices.endpoint", "where notices go (default https://risc.googleapis.com/v1/events:publish)"),
        ("linking.notices.body", "json (default: {\"<json_field>\": SET} as application/json) or secevent+jwt (the bare SET)"),
        ("linking.notices.json_field", "the JSON body's member holding the SET (default set)"),
        ("linking.notices.timeout", "seconds one publish call may take (default 10)"),
        ("linking.revocation_token_types", "token types the revocation endpoint revokes: access_token,refresh_token (default both); a hint naming another gets unsupported_token_type"),
        ("actions.table", "overrides of the action table: {\"account-disabled\": {\"hijacking\": [\"end_sessions\", …], \"\": […]}}"),
        ("actions.retry_window", "how long failed actions are retried, from the SET's receipt (or its requeue), before it is dead-lettered: a duration such as 5d, 12h (default 5d)"),
        ("actions.max_attempts", "a cap on attempts besides the window; 0: none (default 0)"),
        ("actions.base_delay", "first retry delay in seconds, doubling (default 1)"),
        ("actions.max_delay", "longest retry delay in seconds (default 3600)"),
    ]

    /// The configuration `risc serve` runs with: `flags` over `RISC_*` variables over `file`, every
    /// problem reported at once.
    public static func load(
        file: String?, flags: [String: JSONValue], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ReceiverConfiguration {
        try loadWithOrigins(file: file, flags: flags, environment: environment).configuration
    }

    /// `load`, with where each set key's value came from (`ConfigLayers.origin`).
    public static func loadWithOrigins(
        file: String?, flags: [String: JSONValue], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (configuration: ReceiverConfiguration, origins: [String: String]) {
        let known = Set(keys.map(\.key))
        for key in flags.keys where !known.contains(key) { throw ConfigurationError(problems: ["--set: unknown setting '\(key)'"]) }
        var layers = ConfigLayers(filePath: file, environment: environment, flags: flags, knownKeys: known)
        let configuration = ReceiverConfiguration(layers: &layers)
        let problems = layers.problems + configuration.problems.map { Self.attributed($0, known: known, origin: { layers.origin($0) }) }
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        var origins: [String: String] = [:]
        for key in known { origins[key] = layers.origin(key) }
        return (configuration, origins)
    }

    /// A problem with where the settings it names came from (`listen.port must be 0–65535, got
    /// 99999 (listen.port from flag)`), for those a flag, a variable or the file gave.
    static func attributed(_ problem: String, known: Set<String>, origin: (String) -> String?) -> String {
        var named: [String] = []
        for match in problem.matches(of: /[a-z_]+(?:\.[a-z_]+)*/) where known.contains(String(match.0)) && !named.contains(String(match.0)) {
            named.append(String(match.0))
        }
        let origins = named.compactMap { key in origin(key).map { "\(key) from \($0)" } }
        return origins.isEmpty ? problem : problem + " (" + origins.joined(separator: "; ") + ")"
    }

    /// Reads every setting from the layers onto the defaults.
    public init(layers: inout ConfigLayers) {
        self.init()
        if let value = layers.strings("audiences") { audiences = value }
        issuer = layers.string("issuer")
        if let value = layers.strings("issuer_aliases") { issuerAliases = value }
        if let value = layers.strings("algorithms") { algorithms = value }
        if let value = layers.string("discovery_url") { discoveryURL = value }
        jwksFile = layers.string("jwks_file")
        if let value = layers.string("data_dir") { dataDirectory = value }
        if let value = layers.bool("accept_insecure_permissions") { acceptInsecurePermissions = value }
        if let value = layers.string("listen.host") { host = value }
        if let value = layers.int("listen.port") { port = value }
        if let value = layers.string("events_path") { eventsPath = value }
        tlsCertificate = layers.string("tls.certificate")
        tlsKey = layers.string("tls.key")
        if let value = layers.string("admin.host") { adminHost = value }
        if let value = layers.int("admin.port") { adminPort = value }
        adminTokenFile = layers.string("admin.token_file")
        adminTLSCertificate = layers.string("admin.tls.certificate")
        adminTLSKey = layers.string("admin.tls.key")
        adminTLSClientCA = layers.string("admin.tls.client_ca")
        if let value = layers.string("admin.api.host") { adminAPIHost = value }
        adminAPIPort = layers.int("admin.api.port")
        if let value = layers.int("admin.max_connections") { adminMaxConnections = value }
        if let value = layers.double("admin.request_timeout") { adminRequestTimeout = value }
        if let value = layers.int("admin.max_connections_per_address") { adminMaxConnectionsPerAddress = value }
        if let value = layers.double("admin.handshake_timeout") { adminHandshakeTimeout = value }
        if let value = layers.int("max_body_bytes") { maxBodyBytes = value }
        if let value = layers.strings("trusted_proxies") { trustedProxies = value }
        if let value = layers.int("limits.invalid_per_minute") { invalidPerMinute = value }
        if let value = layers.int("limits.max_connections") { maxConnections = value }
        if let value = layers.int("limits.max_connections_per_address") { maxConnectionsPerAddress = value }
        if let value = layers.double("limits.request_timeout") { requestTimeout = value }
        if let value = layers.double("limits.drain_timeout") { drainTimeout = value }
        if let value = layers.int("retry_after") { retryAfter = value }
        if let value = layers.bool("event_log_stdout") { eventLogToStandardOutput = value }
        if let value = layers.string("log.level") {
            if let level = Logger.Level(rawValue: value) {
                logLevel = level
            } else {
                layers.report("log.level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got '\(value)'")
            }
        }
        if let value = layers.string("log.format") {
            if let format = DiagnosticLogFormat(rawValue: value) {
                logFormat = format
            } else {
                layers.report("log.format must be text or json, got '\(value)'")
            }
        }
        if let value = layers.double("clock_skew") { clockSkew = value }
        if let value = layers.double("jwks.min_ttl") { jwksMinimumTTL = value }
        if let value = layers.double("jwks.max_ttl") { jwksMaximumTTL = value }
        if let value = layers.double("jwks.unknown_kid_cooldown") { jwksUnknownKeyCooldown = value }
        if let value = layers.double("jwks.max_staleness") { jwksMaximumStaleness = value }
        if let value = layers.double("jwks.failure_retry") { jwksFailureRetryInterval = value }
        tokenKeyFile = layers.string("accounts.token_key_file")
        if let value = layers.string("store.url") {
            do { store.url = try StoreURL(value) } catch { layers.report(error.description) }
        }
        store.passwordFile = layers.string("store.password_file")
        store.caFile = layers.string("store.ca_file")
        if let value = layers.bool("store.accept_unsafe_durability") { store.acceptUnsafeDurability = value }
        if let value = layers.double("store.lease") { queueLease = value }
        if let value = layers.double("store.timeout") { store.timeout = value }
        if let value = layers.duration("retention.done") { retention.done = value }
        if let value = layers.duration("retention.duplicates") { retention.duplicates = value }
        webhookURL = layers.string("webhook.url")
        webhookSecretFile = layers.string("webhook.secret_file")
        if let value = layers.double("webhook.timeout") { webhookTimeout = value }
        linkingGoogleClientID = layers.string("linking.google_client_id")
        if let value = layers.strings("linking.app_flip_hosts") { linkingAppFlipHosts = value }
        if let value = layers.strings("linking.app_flip_bundle_ids") { linkingAppFlipBundleIDs = value }
        linkingRevocationPath = layers.string("linking.revocation_path")
        linkingClientSecretFile = layers.string("linking.client_secret_file")
        if let value = layers.strings("linking.revocation_token_types") { linkingRevocationTokenTypes = value }
        noticeIssuer = layers.string("linking.notices.issuer")
        noticeKeyDirectory = layers.string("linking.notices.key_dir")
        noticeServiceAccountFile = layers.string("linking.notices.service_account_file")
        if let value = layers.string("linking.notices.audience") { noticeAudience = value }
        if let value = layers.string("linking.notices.token_type") { noticeTokenType = value }
        if let value = layers.string("linking.notices.endpoint") { noticePublisher.endpoint = value }
        if let value = layers.string("linking.notices.body") {
            if let body = GoogleNoticePublisher.Body(rawValue: value) {
                noticePublisher.body = body
            } else {
                layers.report("linking.notices.body must be json or secevent+jwt, got '\(value)'")
            }
        }
        if let value = layers.string("linking.notices.json_field") { noticePublisher.jsonField = value }
        if let value = layers.double("linking.notices.timeout") { noticePublisher.timeout = value }
        if let value = layers.int("actions.max_attempts") { retry.maximumAttempts = value }
        if let value = layers.duration("actions.retry_window") { retry.window = value }
        if let rows = layers.object("actions.table") {
            for (typeName, byReason) in rows {
                guard let type = EventType(name: typeName) else {
                    layers.report("actions.table: unknown event type '\(typeName)'")
                    continue
                }
                guard let reasons = byReason.objectValue else {
                    layers.report("actions.table.\(typeName): expected an object of reason → [actions]")
                    continue
                }
                for (reason, list) in reasons {
                    let names = list.arrayValue?.compactMap(\.stringValue) ?? []
                    let actions = names.compactMap(Action.init(rawValue:))
                    guard list.arrayValue?.count == names.count, actions.count == names.count, !actions.isEmpty else {
                        layers.report("actions.table.\(typeName).\(reason.isEmpty ? "\"\"" : reason): expected a non-empty list of: \(Action.allCases.map(\.rawValue).joined(separator: ", "))")
                        continue
                    }
                    actionTable.set(type, reason: reason == "default" ? "" : reason, actions: actions)
                }
            }
        }
        if let value = layers.double("actions.base_delay") { retry.baseDelay = value }
        if let value = layers.double("actions.max_delay") { retry.maximumDelay = value }
    }
}
