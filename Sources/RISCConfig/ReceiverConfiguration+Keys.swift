public import Foundation
import Logging
import RISCClient
public import RISCCore
public import RISCServer
import RISCStorage

extension ReceiverConfiguration {
    /// Every setting `risc serve` reads, in the order `--print-config` and `docs/configuration.md`
    /// list them: the one table of keys, what each means, how it is read and how it is shown.
    public static var settings: [Setting] {
        [
            .strings("audiences", \.audiences, "OAuth client IDs accepted in `aud` (required; on the command line and in the environment comma-separated)"),
            .optionalString("issuer", \.issuer, "issuer the discovery document must name (unset: Google's, with Google's document)"),
            .strings("issuer_aliases", \.issuerAliases, "further accepted `iss` values, each another name of the issuer (a subject naming one finds the accounts linked under the issuer)"),
            .strings("algorithms", \.algorithms, "allowed JWS algorithms"),
            Setting(
                "discovery_url", "RISC discovery document",
                read: { layers, c in
                    if let value = layers.string("discovery_url") { c.discoveryURL = value }
                },
                value: { c in .string(Redaction.url(c.discoveryURL)) }),
            .optionalString("jwks_file", \.jwksFile, "pinned JWK Set file instead of discovery (offline)"),
            .string("data_dir", \.dataDirectory, "data directory: store, event log, key cache"),
            .bool(
                "accept_insecure_permissions", \.acceptInsecurePermissions,
                "start although the data directory, the token key or a notice key belongs to another user or is open to group or others (refused, exit 64, by default; see `docs/security.md`); links in the data directory are refused whatever this says"
            ),
            .string("listen.host", \.host, "public listener address: an IPv4 or IPv6 address or a host name (so are `admin.host` and `admin.api.host`)"),
            .int("listen.port", \.port, "public listener port"),
            .string("events_path", \.eventsPath, "path that receives SETs: `/` then printable ASCII without `?`, `#` or spaces (so are `linking.revocation_path` and a transmitter's `path`)"),
            .strings(
                "trusted_proxies", \.trustedProxies,
                "peer addresses or CIDR ranges (a reverse proxy: `10.0.0.7`, `10.0.0.0/8`, `2001:db8::/32`) whose `X-Forwarded-For` names the client in the log and for limits; compared as addresses (an IPv4-mapped IPv6 peer matches its IPv4 entry); a host name or typo is an error"
            ).reloaded,
            .int(
                "limits.invalid_per_minute", \.invalidPerMinute,
                "refused requests (400/413) an address may send per minute; then it gets `429` + `Retry-After` until its bucket refills (valid SETs take no tokens; keep it off, or generous, for Google's own addresses)"
            ).reloaded,
            .double(
                "limits.request_timeout", \.requestTimeout,
                "seconds a request may take to arrive whole, from the connection's last answer or opening; idle connections close after as long"
            ).reloaded,
            .double(
                "limits.drain_timeout", \.drainTimeout,
                "seconds a stop (SIGTERM) waits for requests in flight before closing their connections (0–600). Keep it below the service manager's stop timeout: the shipped unit's `TimeoutStopSec` is 30; Docker's `docker stop` waits 10 s unless given `-t` (use `-t 30`, or set this to 8)"
            ).reloaded,
            .int(
                "limits.max_connections", \.maxConnections,
                "connections the public listener holds at once; one more is closed on accept (lowered, with a warning, if the open-file hard limit cannot fit it plus 256)"
            ).reloaded,
            .int(
                "limits.max_connections_per_address", \.maxConnectionsPerAddress,
                "connections one peer address (an IPv6 peer's /64) may hold at once; one more is closed on accept (trusted proxies exempt; `0` turns it off)"
            ).reloaded,
            .optionalString("tls.certificate", \.tlsCertificate, "PEM certificate chain; with tls.key turns on HTTPS (TLS 1.2+)"),
            .optionalString("tls.key", \.tlsKey, "PEM private key for tls.certificate"),
            .string("admin.host", \.adminHost, "admin listener address for /healthz, /readyz, /metrics"),
            .int("admin.port", \.adminPort, "admin listener port"),
            .optionalString("admin.token_file", \.adminTokenFile, "file with the bearer token for the admin account API (off without it)"),
            .optionalString(
                "admin.tls.certificate", \.adminTLSCertificate, "PEM certificate chain; with admin.tls.key turns on HTTPS (TLS 1.2+) on the admin listener and the account API's; SIGHUP reloads it"),
            .optionalString("admin.tls.key", \.adminTLSKey, "PEM private key for admin.tls.certificate"),
            .optionalString(
                "admin.tls.client_ca", \.adminTLSClientCA, "PEM CA bundle: admin clients (Prometheus, the account API's callers) must present a certificate it issued (mutual TLS; default off)"),
            .string("admin.api.host", \.adminAPIHost, "the account API's own listener address, with admin.api.port"),
            Setting(
                "admin.api.port", "serve the account API (/admin/…) on a listener of its own at this port instead of beside /metrics (needs admin.token_file; default: shared)",
                read: { layers, c in
                    c.adminAPIPort = layers.int("admin.api.port")
                },
                value: { c in c.adminAPIPort.map { .number(Double($0)) } ?? .null }),
            .int("admin.max_connections", \.adminMaxConnections, "connections the admin listener serves at once; more wait until one closes"),
            .double("admin.request_timeout", \.adminRequestTimeout, "seconds a request to the admin listener may take to arrive whole; idle connections close after as long"),
            .int(
                "admin.max_connections_per_address", \.adminMaxConnectionsPerAddress,
                "admin connections one client address (IPv6: one /64) may hold at once; more are closed on accept (0: off)"),
            .double("admin.handshake_timeout", \.adminHandshakeTimeout, "seconds a new admin connection has for its TLS handshake and its first request byte"),
            .int("max_body_bytes", \.maxBodyBytes, "largest accepted body; larger gets 413").reloaded,
            .int("retry_after", \.retryAfter, "seconds in Retry-After on 503").reloaded,
            .choice("log.level", \.logLevel, "diagnostic log level: trace, debug, info, notice, warning, error, critical (notice: start, stop and recoveries; --log-level wins)").reloaded,
            .choice("log.format", \.logFormat, "diagnostic log format on standard error: text or json (one object per line, microsecond UTC times; default text; --log-format wins)"),
            .bool("event_log_stdout", \.eventLogToStandardOutput, "also write the event log to standard output"),
            .optionalString(
                "event_log_id", \.eventLogID,
                "the event log's name in its genesis line, one per receiver (each keeps a hash chain of its own; default: the host name)"),
            .optionalString(
                "event_log_checkpoint_key", \.eventLogCheckpointKey,
                "an Ed25519 key (`risc keys checkpoint-key`), outside data_dir, that signs a checkpoint of the event log at least every event_log_checkpoint_interval and at shutdown (DATA_DIR/events.checkpoint, and the diagnostic log); unset: no checkpoints"
            ),
            .duration(
                "event_log_checkpoint_interval", \.eventLogCheckpointInterval,
                "how often a checkpoint is signed, even when nothing happened, so a cut end shows within it: a duration such as 30s, at most 60s"),
            .optionalString(
                "event_log_checkpoint_url", \.eventLogCheckpointURL,
                "also POST each checkpoint (text/plain, the signed note) to this HTTPS endpoint as it is made, off the box; a failure is logged and the next one is sent all the same"
            ),
            .optionalString(
                "event_log_checkpoint_ca_file", \.eventLogCheckpointCAFile,
                "PEM CA bundle that verifies event_log_checkpoint_url's certificate instead of the system's CAs (an organisation's own CA, trusted for that endpoint alone)"
            ),
            .bool(
                "event_log_chain", \.eventLogChain,
                "chain every event log line (seq, prev); false only to measure the chain's cost (risc bench serve --chain-cost): no checkpoints, segments or verification"
            ),
            .int(
                "event_log_rotate_bytes", \.eventLogRotateBytes,
                "risc rotates the event log into segments (events-NNNNNN.log, each with a digest, signed with event_log_checkpoint_key) once it holds this many bytes; 0: not by size"
            ),
            .duration(
                "event_log_rotate_interval", \.eventLogRotateInterval,
                "rotate the event log once its file is this old (a duration such as 1d); 0: not by time; with both 0, rotation is logrotate's"),
            .duration(
                "event_log_retention", \.eventLogRetention,
                "delete a segment's file this long after it closed (its digest stays and the next digest names it expired); 0: keep them"),
            .double("clock_skew", \.clockSkew, "seconds (0 or more) a future iat may be ahead before a warning"),
            .double("jwks.min_ttl", \.jwksMinimumTTL, "lower bound on a key set's lifetime from max-age"),
            .double("jwks.max_ttl", \.jwksMaximumTTL, "upper bound on it"),
            .double("jwks.unknown_kid_cooldown", \.jwksUnknownKeyCooldown, "seconds between forced refetches for unknown kids"),
            .double("jwks.max_staleness", \.jwksMaximumStaleness, "seconds past expiry a key set is still served during an issuer outage"),
            .double(
                "jwks.failure_retry", \.jwksFailureRetryInterval,
                "seconds between fetch attempts after a failure; 0: at once (during an outage each SET that arrives may start a fetch)"),
            Setting(
                "store.url",
                "a shared PostgreSQL store for several receivers: `postgres://USER@HOST:PORT/DB` (an IPv6 address in brackets: `postgres://risc@[2001:db8::5]/risc`), `?sslmode=disable|require|verify-full` (TLS 1.2+; `verify-full` when not given, since issue 24: a password file is refused over TCP with anything else), `&host=/socket/dir` for a Unix socket; never a password (see `docs/high-availability.md`)",
                read: { layers, c in
                    if let value = layers.string("store.url") {
                        do { c.store.url = try StoreURL(value) } catch { layers.report("\(error)") }
                    }
                },
                value: { c in .optional(c.store.url?.text) }),
            .optionalString("store.password_file", \.store.passwordFile, "file with the PostgreSQL password (never in store.url)"),
            .optionalString("store.ca_file", \.store.caFile, "PEM CA bundle that verifies the PostgreSQL server (sslmode=verify-full; default the system's)"),
            .bool("store.accept_unsafe_durability", \.store.acceptUnsafeDurability, "accept a PostgreSQL server with fsync or synchronous_commit off (never in production; default false)"),
            .double("store.timeout", \.store.timeout, "seconds a SET may wait for the shared store's COMMIT before it is answered 503 (Google retries; default 5)"),
            .double(
                "store.lease", \.queueLease,
                "seconds a receiver holds queued work it claimed before another may rescue it. With a webhook the lease is at least a claim's calls: `max(store.lease, batch × (webhook.timeout + 5) + 30)`, 150 s with the defaults (batch 8, timeout 10); unlink notices `max(store.lease, 4 × (timeout + 5) + 30)`; so a dead receiver's webhook work is rescued after up to 150 s"
            ),
            .optionalString(
                "accounts.token_key_file", \.tokenKeyFile,
                "the token-fingerprint key (`risc keys token-key --out FILE`); a store opens only with the key its fingerprints were made with; required with `store.url` (one key for every receiver)"),
            .duration("retention.done", \.retention.done, "how long a done SET stays whole (raw token, subjects) before they are removed; a duration such as 30d, 0 keeps them forever")
                .reloaded,
            .duration(
                "retention.duplicates", \.retention.duplicates, "how long after receipt a done SET's (issuer, `jti`) is kept to recognise redeliveries (at least 7 days and at least `retention.done`)"
            ).reloaded,
            Setting(
                "webhook.url", "POST actions to this revocation endpoint instead of the embedded store (or, with webhook.scope = rows, the events whose row names `webhook`)",
                read: { layers, c in
                    c.webhookURL = layers.string("webhook.url")
                },
                value: { c in .optional(c.webhookURL.map(Redaction.url)) }),
            .optionalString("webhook.secret_file", \.webhookSecretFile, "file with the webhook's HMAC secret (16+ bytes)"),
            .optionalString(
                "webhook.ca_file", \.webhookCAFile,
                "PEM CA bundle that verifies the webhook's certificate instead of the system's CAs (a site's own CA, trusted for the webhook alone)"),
            .double("webhook.timeout", \.webhookTimeout, "seconds per webhook request"),
            .choice(
                "webhook.scope", \.webhookScope,
                "all (every SET's actions go to the webhook, risc applies none to its accounts; default) or rows (only events whose action row names `webhook`, per transmitter too; risc applies the rest)"
            ),
            .optionalString(
                "linking.google_client_id", \.linkingGoogleClientID,
                "the OAuth client id the site registered for Google's account linking: turns on the admin listener's App Flip check (POST /admin/linking/app-flip)"),
            .strings("linking.app_flip_hosts", \.linkingAppFlipHosts, "redirect hosts accepted besides Google's production and sandbox ones (comma-separated)"),
            .strings("linking.app_flip_bundle_ids", \.linkingAppFlipBundleIDs, "app bundle ids accepted besides the Google Home and Assistant apps' (comma-separated)"),
            .optionalString(
                "linking.revocation_path", \.linkingRevocationPath,
                "serve the RFC 7009 token revocation endpoint Google calls on unlink at this path of the public listener (needs linking.google_client_id and linking.client_secret_file)"),
            .optionalString("linking.client_secret_file", \.linkingClientSecretFile, "file holding the client secret the site issued to Google (at least 16 bytes), for the revocation endpoint"),
            .optionalString(
                "linking.notices.issuer", \.noticeIssuer,
                "send unlink notices to Google when the site revokes linked tokens: the site's issuer URL (its discovery document and JWKS are served under it on the public listener)"),
            .optionalString("linking.notices.key_dir", \.noticeKeyDirectory, "the notice signing keys (`risc keys rotate --dir DIR`; the same directory on every receiver)"),
            .optionalString("linking.notices.service_account_file", \.noticeServiceAccountFile, "the Google service-account JSON key whose token authorizes the calls (as for `risc stream`)"),
            .string("linking.notices.audience", \.noticeAudience, "the notices' aud (unconfirmed by Google)"),
            .string("linking.notices.token_type", \.noticeTokenType, "token_type of a notice when the caller names none: refresh_token or access_token"),
            Setting(
                "linking.notices.endpoint", "where notices go",
                read: { layers, c in
                    if let value = layers.string("linking.notices.endpoint") { c.noticePublisher.endpoint = value }
                },
                value: { c in .string(Redaction.url(c.noticePublisher.endpoint)) }),
            .choice("linking.notices.body", \.noticePublisher.body, "json ({\"<json_field>\": SET} as application/json) or secevent+jwt (the bare SET)"),
            .string("linking.notices.json_field", \.noticePublisher.jsonField, "the JSON body's member holding the SET"),
            .double("linking.notices.timeout", \.noticePublisher.timeout, "seconds one publish call may take"),
            .strings(
                "linking.revocation_token_types", \.linkingRevocationTokenTypes,
                "token types the revocation endpoint revokes: access_token, refresh_token; a hint naming another gets unsupported_token_type"),
            Setting(
                "actions.table", "overrides of the action table: {\"account-disabled\": {\"hijacking\": [\"end_sessions\", …], \"\": […]}}",
                read: { layers, c in
                    if let rows = layers.object("actions.table") {
                        readActionRows(rows, key: "actions.table", into: &c.actionTable, report: { layers.report($0) })
                    }
                },
                value: { c in .object(Self.json(c.actionTable)) }, copy: { $0.actionTable = $1.actionTable }
            ).reloaded,
            transmittersSetting,
            .duration(
                "actions.retry_window", \.retry.window,
                "how long failed actions are retried, from the SET's receipt (or its requeue), before it is dead-lettered: a duration such as 5d, 12h"
            ).reloaded,
            .int("actions.max_attempts", \.retry.maximumAttempts, "a cap on attempts besides the window; 0: none").reloaded,
            .double("actions.base_delay", \.retry.baseDelay, "first retry delay in seconds, doubling").reloaded,
            .double("actions.max_delay", \.retry.maximumDelay, "longest retry delay in seconds").reloaded,
        ]
    }

    /// Every key with what it means (the table's first two columns).
    public static var keys: [(key: String, help: String)] { settings.map { ($0.key, $0.help) } }

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
        for key in flags.keys where !known.contains(key) { throw ConfigurationError(problems: ["--set: unknown setting '\(key)'\(ConfigLayers.suggestion(for: key, among: known))"]) }
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
        for setting in Self.settings { setting.read(&layers, &self) }
    }
}

/// One setting of `ReceiverConfiguration.settings`: its key, what it means, how it is read from
/// the layers onto a configuration, and how a configuration shows it (`--print-config`, redacted).
public struct Setting {
    public let key: String
    public let help: String
    let read: (inout ConfigLayers, inout ReceiverConfiguration) -> Void
    let value: (ReceiverConfiguration) -> JSONValue
    /// Takes this setting's value from another configuration (a SIGHUP reload's).
    let copy: ((inout ReceiverConfiguration, ReceiverConfiguration) -> Void)?
    /// SIGHUP applies it without a restart (`reloaded`).
    public private(set) var appliedOnReload = false

    init(
        _ key: String, _ help: String, read: @escaping (inout ConfigLayers, inout ReceiverConfiguration) -> Void,
        value: @escaping (ReceiverConfiguration) -> JSONValue, copy: ((inout ReceiverConfiguration, ReceiverConfiguration) -> Void)? = nil
    ) {
        self.key = key
        self.help = help
        self.read = read
        self.value = value
        self.copy = copy
    }

    /// This setting, applied by SIGHUP (the listeners, workers and retention read it again).
    var reloaded: Setting {
        precondition(copy != nil, "\(key): a reloaded setting needs copy")
        var setting = self
        setting.appliedOnReload = true
        return setting
    }

    typealias Path<Value> = WritableKeyPath<ReceiverConfiguration, Value>

    static func string(_ key: String, _ path: Path<String>, _ help: String) -> Setting {
        Setting(
            key, help, read: { layers, c in if let value = layers.string(key) { c[keyPath: path] = value } }, value: { .string($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func optionalString(_ key: String, _ path: Path<String?>, _ help: String) -> Setting {
        Setting(key, help, read: { layers, c in c[keyPath: path] = layers.string(key) }, value: { .optional($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func strings(_ key: String, _ path: Path<[String]>, _ help: String) -> Setting {
        Setting(
            key, help, read: { layers, c in if let value = layers.strings(key) { c[keyPath: path] = value } }, value: { .strings($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func int(_ key: String, _ path: Path<Int>, _ help: String) -> Setting {
        Setting(
            key, help, read: { layers, c in if let value = layers.int(key) { c[keyPath: path] = value } }, value: { .number(Double($0[keyPath: path])) },
            copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func double(_ key: String, _ path: Path<Double>, _ help: String) -> Setting {
        Setting(
            key, help, read: { layers, c in if let value = layers.double(key) { c[keyPath: path] = value } }, value: { .number($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func bool(_ key: String, _ path: Path<Bool>, _ help: String) -> Setting {
        Setting(key, help, read: { layers, c in if let value = layers.bool(key) { c[keyPath: path] = value } }, value: { .bool($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// One of an enumeration's raw values; another is a problem naming the choices.
    static func choice<Value: RawRepresentable & CaseIterable>(_ key: String, _ path: Path<Value>, _ help: String) -> Setting
    where Value.RawValue == String {
        Setting(
            key, help,
            read: { layers, c in
                guard let text = layers.string(key) else { return }
                guard let value = Value(rawValue: text) else {
                    let names = Value.allCases.map(\.rawValue)
                    let choices = names.count == 2 ? "\(names[0]) or \(names[1])" : "one of " + names.joined(separator: ", ")
                    return layers.report("\(key) must be \(choices), got '\(text)'")
                }
                c[keyPath: path] = value
            },
            value: { .string($0[keyPath: path].rawValue) }, copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// Seconds, written as a duration (`30d`, `12h`) or a number.
    static func duration(_ key: String, _ path: Path<Double>, _ help: String) -> Setting {
        Setting(
            key, help, read: { layers, c in if let value = layers.duration(key) { c[keyPath: path] = value } }, value: { .duration($0[keyPath: path]) }, copy: { $0[keyPath: path] = $1[keyPath: path] }
        )
    }
}
