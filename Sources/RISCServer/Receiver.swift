import CoreMetrics
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import RISCLocal
import RISCClient
import RISCCore
import RISCStorage
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// `risc serve`: the public push endpoint, the admin listener, the key cache and the store, run
/// as one `ServiceGroup`.
///
/// Start-up order: store, event log, keys (warmed before listening), admin listener, public
/// listener. On SIGTERM/SIGINT the public listener stops accepting and finishes in-flight
/// requests first, then the admin listener and the key refresher stop; the store then commits
/// what is waiting and the event log flushes last. SIGHUP reopens the event log file and reloads
/// what can change without a restart (`ConfigurationReloader`).
public final class Receiver: Sendable {
    public let configuration: ReceiverConfiguration
    /// The store behind the ports, as `store.url` chose it.
    public let storage: ReceiverStorage
    public let eventLog: JSONLinesEventLog
    public let metrics: ReceiverMetrics
    public let keys: any KeyProvider
    /// The embedded store's claim on its data directory (one `risc serve` at a time).
    let directoryLock: DataDirectoryLock
    let keySource: KeySetSource
    let cache: JWKSCache?
    let logger: Logger
    let group: ServiceGroup
    /// SIGHUP's work; holds the public listener's certificate and key when it serves HTTPS itself.
    let onHangup: Hangup
    /// SIGHUP's configuration reload, when the receiver was given a source.
    let reloader: ConfigurationReloader?
    let storeSampler: StoreSampler
    private let publicPort: AsyncStream<Int>.Continuation
    private let adminPort: AsyncStream<Int>.Continuation
    private let apiPort: AsyncStream<Int>.Continuation
    /// The ports actually bound (useful with port 0), each yielded once the listener runs;
    /// `apiPorts` only with `admin.api.port` (it finishes at once otherwise).
    public let publicPorts: AsyncStream<Int>
    public let adminPorts: AsyncStream<Int>
    public let apiPorts: AsyncStream<Int>

    /// `metricsFactory`: the swift-metrics backend the receiver's metrics go to; nil (as in
    /// `risc serve`): a Prometheus registry of its own, which the admin listener's `/metrics`
    /// renders. With another backend `/metrics` answers 404 and the store and key-set gauges are
    /// sampled every `healthSampleInterval` seconds (so are they for `/readyz`).
    /// `source`: where SIGHUP reads the configuration again (nil: it only reopens the event log and
    /// reloads TLS); `logLevel`: the level `logger`'s handler reads, which a reload sets.
    public init(
        configuration: ReceiverConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil,
        source: ConfigurationSource? = nil, logLevel: LogLevelSetting? = nil
    ) throws {
        self.configuration = configuration
        self.logger = logger
        let problems = configuration.problems + Self.preflight(configuration)
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }

        // One receiver per data directory (its event log and key cache), whichever the store.
        directoryLock = try DataDirectoryLock(directory: configuration.dataDirectory)
        if configuration.store.url == nil, let moved = MovedMarker.refusal(in: configuration.dataDirectory) { throw moved }
        eventLog = try JSONLinesEventLog(
            path: (configuration.dataDirectory as NSString).appendingPathComponent("events.log"),
            toStandardOutput: configuration.eventLogToStandardOutput)
        let actionTarget = configuration.webhookURL == nil ? "accounts" : "webhook"
        metrics = ReceiverMetrics(
            factory: metricsFactory, version: configuration.build.version, commit: configuration.build.commit, actionTarget: actionTarget)
        let log: any EventLog = eventLog
        let noticeKeys = try ReceiverStorage.noticeKeys(configuration: configuration, logger: logger)
        storage = try ReceiverStorage.open(configuration: configuration, log: log, metrics: metrics, logger: logger, noticeKeys: noticeKeys)
        if let file = configuration.jwksFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ConfigurationError(problems: ["jwks_file: cannot read \(file)"])
            }
            let provider = StaticKeyProvider(
                keys: try JWKSet(json: Array(data)), issuer: configuration.issuer ?? DiscoveryDocument.googleIssuer)
            keys = provider
            keySource = .pinned(provider)
            cache = nil
        } else {
            var jwks = configuration.jwksConfiguration
            jwks.persistencePath = (configuration.dataDirectory as NSString).appendingPathComponent("jwks-cache.json")
            let cache = JWKSCache(configuration: jwks, logger: logger)
            keys = cache
            keySource = .cache(cache)
            self.cache = cache
        }

        let intake = Intake(
            verifier: SETVerifier(policy: configuration.policy, keys: keys), store: storage.events, log: log, metrics: metrics,
            clock: { Date().timeIntervalSince1970 })
        let adminRouter = Router(context: RISCRequestContext.self)
        let storeSampler = StoreSampler(store: storage.health, interval: configuration.healthSampleInterval)
        self.storeSampler = storeSampler
        let metricsSampler = MetricsSampler(keys: keySource, store: storeSampler, metrics: metrics, noticeKeys: noticeKeys)
        HealthController(keys: keySource, store: storeSampler, backend: storage.backendName, metrics: metrics, noticeKeys: noticeKeys)
            .register(on: adminRouter)
        // The account API beside health and metrics, or on a listener of its own (admin.api.port).
        let apiRouter = configuration.adminAPIPort == nil ? adminRouter : Router(context: RISCRequestContext.self)
        if let tokenFile = configuration.adminTokenFile {
            let token = try Self.readSecret(tokenFile, setting: "admin.token_file")  // its length: preflight
            AdminAccountsController(
                accounts: storage.accounts, token: token,
                appFlip: configuration.linkingGoogleClientID.map {
                    AppFlipPolicy(clientID: $0, extraHosts: configuration.linkingAppFlipHosts, extraBundleIDs: configuration.linkingAppFlipBundleIDs)
                },
                notices: configuration.unlinkNotices(tokenKey: storage.tokenKey), log: log
            ).register(on: apiRouter)
        }

        let (publicPorts, publicPort) = AsyncStream.makeStream(of: Int.self)
        let (adminPorts, adminPort) = AsyncStream.makeStream(of: Int.self)
        let (apiPorts, apiPort) = AsyncStream.makeStream(of: Int.self)
        self.publicPorts = publicPorts
        self.adminPorts = adminPorts
        self.apiPorts = apiPorts
        self.publicPort = publicPort
        self.adminPort = adminPort
        self.apiPort = apiPort

        var served: [String: ServerTLS] = [:]
        for pair in configuration.tlsPairs {
            served[pair.listener] = try ServerTLS(certificate: pair.certificate, key: pair.key, clientCA: pair.clientCA, setting: pair.setting)
        }
        let tls = served["public"], adminTLS = served["admin"]
        for warning in Self.warnings(configuration) { logger.warning("\(warning)") }
        var revocation: RevocationIntake?
        if configuration.linkingRevocationPath != nil, let clientID = configuration.linkingGoogleClientID,
            let secretFile = configuration.linkingClientSecretFile
        {
            let secret = try Self.readSecret(secretFile, setting: "linking.client_secret_file")  // its length: preflight
            revocation = RevocationIntake(
                policy: RevocationPolicy(clientID: clientID, clientSecret: secret, tokenTypes: Set(configuration.linkingRevocationTokenTypes)),
                store: storage.events, log: log, metrics: metrics, signingKey: LocalSET.signingKey(tokenKey: storage.tokenKey),
                clock: { Date().timeIntervalSince1970 })
        }
        let push = PushEndpoint(
            settings: Self.pushSettings(configuration, logger: logger),
            intake: intake, revocation: revocation,
            documents: configuration.noticeIssuer.flatMap { issuer in noticeKeys.map { NoticeDocuments(issuer: issuer, keys: $0) } },
            limiter: configuration.invalidPerMinute > 0 ? InvalidRequestLimiter(perMinute: configuration.invalidPerMinute) : nil,
            tls: tls, logger: logger, metrics: metrics, onRunning: { publicPort.yield($0) })
        func adminApplication(_ router: Router<RISCRequestContext>, host: String, port: Int, ports: AsyncStream<Int>.Continuation) -> some Service {
            return Application(
                router: router,
                server: AdminListener.server(
                    limits: .init(
                        requestTimeout: .nanoseconds(Int64(configuration.adminRequestTimeout * 1e9)),
                        handshakeTimeout: .nanoseconds(Int64(configuration.adminHandshakeTimeout * 1e9)),
                        maxConnectionsPerAddress: configuration.adminMaxConnectionsPerAddress),
                    tls: adminTLS),
                configuration: .init(
                    address: .hostname(host, port: port),
                    availableConnectionsDelegate: .maximum(configuration.adminMaxConnections, logger: logger)),
                onServerRunning: { channel in ports.yield(channel.localAddress?.port ?? 0) },
                logger: logger)
        }
        let adminApp = adminApplication(adminRouter, host: configuration.adminHost, port: configuration.adminPort, ports: adminPort)

        let retention = RetentionService(
            store: try storage.store.retention(), policy: configuration.retention, interval: configuration.retentionInterval, log: log, logger: logger)
        let storage = self.storage
        let reloader = source.map {
            ConfigurationReloader(
                source: $0, running: configuration, logLevel: logLevel, push: push, storage: storage, retention: retention, eventLog: log, logger: logger)
        }
        self.reloader = reloader
        onHangup = Hangup(eventLog: eventLog, tls: tls, adminTLS: adminTLS, metrics: metrics, logger: logger, configuration: reloader)
        // Started in this order; on SIGTERM stopped in the reverse one: the public listener drains
        // first, the storage (its workers, then the store) stops last.
        var services: [any Service] = [ReceiverStorage.StorageService(storage: storage), HangupHandler(hangup: onHangup)]
        if let cache { services.append(KeyRefresher(cache: cache)) }
        services.append(retention)
        services.append(HealthSamplerService(store: storeSampler, metrics: metrics.registry == nil ? metricsSampler : nil))
        services.append(adminApp)
        if let port = configuration.adminAPIPort {
            services.append(adminApplication(apiRouter, host: configuration.adminAPIHost, port: port, ports: apiPort))
        } else {
            apiPort.finish()
        }
        services.append(push)
        group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }

    /// Asks the store its health questions now, as the sampler does every
    /// `healthSampleInterval` seconds (`/readyz` and `/metrics` answer from the answers).
    public func sampleHealth() async { await storeSampler.sample() }

    /// Runs until SIGTERM/SIGINT (or `shutdown()`), then closes the store and the event log.
    public func run() async throws {
        if let cache { await cache.refreshNow() }  // warm the keys before the first request
        var startup = EventLogRecord(step: .serve, outcome: .started, time: Date().timeIntervalSince1970)
        startup["events_path"] = .string(configuration.eventsPath)
        startup["tls"] = .bool(configuration.tlsCertificate != nil)
        if let tls = onHangup.tls { startup["tls_not_after"] = .string(Timestamp.iso8601(tls.notValidAfter)) }
        if let tls = onHangup.adminTLS { startup["admin_tls_not_after"] = .string(Timestamp.iso8601(tls.notValidAfter)) }
        for (name, tls) in onHangup.listeners { onHangup.noteCertificate(listener: name, notValidAfter: tls.notValidAfter) }
        startup["store"] = .string(storage.backendName)
        let result: Result<Void, any Error>
        do {
            // Before any listener: a shared store is migrated and checked (waiting for a server not
            // up yet) before the first SET could be acknowledged.
            try await storage.store.prepare(logger: logger)
            await storeSampler.sample()  // the first probe after start has the store's answers
            eventLog.record(startup)
            do { result = .success(try await group.run()) } catch { result = .failure(error) }
            eventLog.record(EventLogRecord(step: .serve, outcome: .stopped, time: Date().timeIntervalSince1970))
        } catch {
            result = .failure(error)  // the shared store refused us: nothing was started
            await storage.stop()
        }
        eventLog.close()
        directoryLock.release()
        publicPort.finish()
        adminPort.finish()
        apiPort.finish()
        try result.get()
    }

    /// The public listener's settings from `configuration` (at the start, and the limits again on SIGHUP).
    static func pushSettings(_ configuration: ReceiverConfiguration, logger: Logger) -> PushEndpoint.Settings {
        PushEndpoint.Settings(
            host: configuration.host, port: configuration.port, path: configuration.eventsPath,
            revocationPath: configuration.linkingRevocationPath,
            maxBodyBytes: configuration.maxBodyBytes, retryAfter: configuration.retryAfter,
            trustedProxies: TrustedProxies(configuration.trustedProxies),
            requestTimeout: .nanoseconds(Int64(configuration.requestTimeout * 1e9)),
            drainTimeout: .nanoseconds(Int64(configuration.drainTimeout * 1e9)),
            maxConnections: Self.connectionLimit(configuration.maxConnections, logger: logger),
            maxConnectionsPerAddress: configuration.maxConnectionsPerAddress)
    }

    /// Descriptors kept aside for everything but public connections: the store's connections and
    /// WAL, the event log, the admin listener and its clients, key fetches.
    static let reservedDescriptors = 256

    /// `limits.max_connections`, once the open-file limit is raised to fit it (soft toward hard);
    /// if the hard limit is lower, the connection limit is lowered instead, with a warning, so
    /// connections can never use up the descriptors the store and the log need.
    static func connectionLimit(_ configured: Int, logger: Logger) -> Int {
        let available = raiseOpenFileLimit(to: configured + reservedDescriptors) - reservedDescriptors
        guard available < configured else { return configured }
        let limit = max(1, available)
        logger.warning(
            "limits.max_connections lowered to fit the open-file limit (raise LimitNOFILE or ulimit -n)",
            metadata: ["risc.configured": "\(configured)", "risc.limit": "\(limit)"])
        return limit
    }

    /// Raises the soft open-file limit to `wanted` (at most the hard limit); returns the soft
    /// limit in force afterwards.
    static func raiseOpenFileLimit(to wanted: Int) -> Int {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return wanted }
        if limit.rlim_cur == rlim_t.max || limit.rlim_cur >= rlim_t(wanted) { return wanted }
        var raised = limit
        raised.rlim_cur = limit.rlim_max == rlim_t.max ? rlim_t(wanted) : min(limit.rlim_max, rlim_t(wanted))
        return Int(setrlimit(resource, &raised) == 0 ? raised.rlim_cur : limit.rlim_cur)
    }

    /// Everything about the files and directories a configuration names that would stop a start,
    /// checked without binding a port or opening the store: `risc serve --check-config` and the
    /// start run this same list, so the check refuses whatever the start refuses.
    /// What a start warns about (and `--check-config` prints): a listener serving plain HTTP on
    /// an address other hosts can reach.
    public static func warnings(_ configuration: ReceiverConfiguration) -> [String] {
        var warnings: [String] = []
        if configuration.tlsCertificate == nil && !URLPolicy.isLoopback(host: configuration.host) {
            warnings.append("serving plain HTTP on a non-loopback address (\(configuration.host)): put a TLS-terminating proxy in front, or set tls.certificate and tls.key")
        }
        var admin = [(configuration.adminHost, configuration.adminPort)]
        if let port = configuration.adminAPIPort { admin.append((configuration.adminAPIHost, port)) }
        for (host, port) in admin where configuration.adminTLSCertificate == nil && !URLPolicy.isLoopback(host: host) {
            warnings.append("the admin listener \(host):\(port) serves plain HTTP on a non-loopback address: set admin.tls.certificate and admin.tls.key")
        }
        return warnings
    }

    /// Why a file named in the configuration cannot be read as one (the system's words, or "it is
    /// a directory", which `isReadableFile` lets through and the start then fails on); nil: it can.
    static func unreadable(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return "it is a directory" }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        close(descriptor)
        return nil
    }

    public static func preflight(_ configuration: ReceiverConfiguration) -> [String] {
        var problems: [String] = []
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: configuration.dataDirectory, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                problems.append("data_dir: \(configuration.dataDirectory) exists and is not a directory")
            } else if !files.isWritableFile(atPath: configuration.dataDirectory) {
                problems.append("data_dir: \(configuration.dataDirectory) is not writable by this user")
            }
        } else if !configuration.dataDirectory.isEmpty {
            var parent = configuration.dataDirectory
            repeat {
                parent = (parent as NSString).deletingLastPathComponent
                if parent.isEmpty { parent = "." }
            } while !files.fileExists(atPath: parent, isDirectory: &isDirectory) && parent != "/" && parent != "."
            if !isDirectory.boolValue || !files.isWritableFile(atPath: parent) {
                problems.append("data_dir: \(configuration.dataDirectory) cannot be created (\(parent) is not a writable directory)")
            }
        }
        problems += trustProblems(configuration)
        let named: [(String, String?)] = [
            ("tls.certificate", configuration.tlsCertificate), ("tls.key", configuration.tlsKey), ("jwks_file", configuration.jwksFile),
            ("admin.tls.certificate", configuration.adminTLSCertificate), ("admin.tls.key", configuration.adminTLSKey),
            ("admin.tls.client_ca", configuration.adminTLSClientCA),
            ("store.password_file", configuration.store.passwordFile), ("store.ca_file", configuration.store.caFile),
            ("accounts.token_key_file", configuration.tokenKeyFile),
            ("linking.notices.service_account_file", configuration.noticeIssuer == nil ? nil : configuration.noticeServiceAccountFile),
        ]
        for (setting, path) in named {
            if let path, let why = unreadable(path) { problems.append("\(setting): cannot read \(path): \(why)") }
        }
        let secrets: [(String, String?, String)] = [
            ("admin.token_file", configuration.adminTokenFile, "token"), ("webhook.secret_file", configuration.webhookSecretFile, "secret"),
            ("linking.client_secret_file", configuration.linkingRevocationPath == nil ? nil : configuration.linkingClientSecretFile, "secret"),
        ]
        for (setting, path, what) in secrets {
            guard let path else { continue }
            do {
                if try readSecret(path, setting: setting).count < 16 { problems.append("\(setting): the \(what) in \(path) must be at least 16 bytes") }
            } catch let error as ConfigurationError {
                problems += error.problems
            } catch {
                problems.append("\(setting): \(error)")
            }
        }
        if let path = configuration.tokenKeyFile, let data = files.contents(atPath: path), data.count < TokenKey.length {
            problems.append("accounts.token_key_file: \(path) holds \(data.count) bytes; a token key has at least \(TokenKey.length)")
        }
        if let path = configuration.jwksFile, let data = files.contents(atPath: path) {
            do { _ = try JWKSet(json: Array(data)) } catch { problems.append("jwks_file: \(path): \(error)") }
        }
        // Unreadable files are named above; the pairs that can be read must load.
        for pair in configuration.tlsPairs where [pair.certificate, pair.key, pair.clientCA ?? pair.key].allSatisfy(files.isReadableFile(atPath:)) {
            do { _ = try ServerTLS.load(pair) } catch { problems.append("\(error)") }
        }
        if configuration.noticeIssuer != nil, configuration.noticeProblems.isEmpty,
            files.isReadableFile(atPath: configuration.noticeServiceAccountFile ?? "")
        {
            do { _ = try ReceiverStorage.makePublisher(configuration: configuration) } catch let error as ConfigurationError {
                problems += error.problems
            } catch {
                problems.append("linking.notices: \(error)")
            }
        }
        return problems
    }

    /// Whether the files risc keeps its secrets in can be trusted (issue 24 #6): no symbolic link
    /// in the data directory, ever; unless `accept_insecure_permissions`, a data directory and a
    /// notice-key directory of this user's, not writable by group or others, and key files (the
    /// token key, the notice keys) of this user's, open to no one else.
    static func trustProblems(_ configuration: ReceiverConfiguration) -> [String] {
        let check = !configuration.acceptInsecurePermissions
        var problems = PrivateFiles.dataDirectoryProblems(configuration.dataDirectory, checkOwnership: check)
        guard check else { return problems }
        let tokenKey = configuration.tokenKeyFile ?? (configuration.dataDirectory as NSString).appendingPathComponent("token-key")
        if let problem = PrivateFiles.keyFileProblem(tokenKey, setting: configuration.tokenKeyFile == nil ? "data_dir" : "accounts.token_key_file") {
            problems.append(problem)
        }
        if configuration.noticeIssuer != nil, let directory = configuration.noticeKeyDirectory {
            if let problem = PrivateFiles.directoryProblem(directory, setting: "linking.notices.key_dir") { problems.append(problem) }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for name in names.sorted() where name.hasSuffix(".pem") {
                let path = (directory as NSString).appendingPathComponent(name)
                if let problem = PrivateFiles.keyFileProblem(path, setting: "linking.notices.key_dir") { problems.append(problem) }
            }
        }
        return problems
    }

    /// A secret kept in a file (webhook secret, admin token), without surrounding whitespace.
    static func readSecret(_ path: String, setting: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(problems: ["\(setting): cannot read \(path)"])
        }
        return Array(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    }

    /// What SIGHUP does: reopen the event log (log rotation), reload the configuration's
    /// reloadable settings and, when serving HTTPS, the certificate and key (renewal).
    public func hangup() { onHangup.hangup() }

    /// Reads the configuration again and applies its reloadable settings, as SIGHUP does; nil
    /// without a source.
    @discardableResult
    public func reloadConfiguration() -> ConfigurationReload? { reloader?.reload() }

    /// The configuration in force: the start's, with the reloadable settings of the last reload.
    public var currentConfiguration: ReceiverConfiguration { reloader?.configuration ?? configuration }

    /// Loads `tls.certificate` and `tls.key` again; new connections use them. If they do not
    /// load, the pair in use stays and the failure is logged. Returns whether a new pair is in use.
    @discardableResult
    public func reloadTLS() -> Bool { onHangup.reloadTLS() }

    /// Starts a graceful shutdown, as SIGTERM does.
    public func shutdown() async { await group.triggerGracefulShutdown() }
}

/// A configuration that cannot run, with every problem named.
public struct ConfigurationError: Error, CustomStringConvertible {
    public let problems: [String]
    public init(problems: [String]) { self.problems = problems }
    public var description: String { "invalid configuration:\n" + problems.map { "  - \($0)" }.joined(separator: "\n") }
}

/// Keeps the issuer's key set fresh until shutdown.
struct KeyRefresher: Service {
    let cache: JWKSCache
    func run() async throws {
        await cancelWhenGracefulShutdown { await cache.run() }
    }
}
