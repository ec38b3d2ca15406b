public import CoreMetrics
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import NIOSSL
import RISCClient
public import RISCCore
public import RISCLocal
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
    /// The first transmitter's keys (Google's, unless only others are configured).
    public let keys: any KeyProvider
    /// The embedded store's claim on its data directory (one `risc serve` at a time).
    let directoryLock: DataDirectoryLock
    let keySource: KeySetSource
    /// The transmitters' key caches (none pinned).
    let caches: [JWKSCache]
    /// RFC 8936 pollers, one per transmitter with `delivery = "poll"`.
    public let pollers: [SSFPoller]
    let logger: Logger
    let group: ServiceGroup
    /// SIGHUP's work; holds the public listener's certificate and key when it serves HTTPS itself.
    let onHangup: Hangup
    /// SIGHUP's configuration reload, when the receiver was given a source.
    let reloader: ConfigurationReloader?
    let storeSampler: StoreSampler
    /// Now, in seconds since the epoch (see `init`): the receiver's own lines' times.
    let clock: @Sendable () -> Double
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
    /// reloads TLS); `logLevel`: the level `logger`'s handler reads, which a reload sets; `clock`:
    /// now, in seconds since the epoch, for the intake's times, the key caches' TTLs and staleness,
    /// the invalid-request limiter's and the refused lines' sampling windows, the periodic
    /// services' intervals and the queue workers' backoff and polls, the times the stores and the
    /// admin API record, the notice key directory's re-reads, the receiver's own event-log lines
    /// and its certificates' time left (tests drive it; the wall clock by default).
    public init(
        configuration: ReceiverConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil,
        source: ConfigurationSource? = nil, logLevel: LogLevelSetting? = nil, clock: (@Sendable () -> Double)? = nil
    ) throws {
        let clock = clock ?? systemNow
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        let problems = configuration.problems + Self.preflight(configuration)
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }

        // One receiver per data directory (its event log and key cache), whichever the store.
        directoryLock = try DataDirectoryLock(directory: configuration.dataDirectory)
        if configuration.store.url == nil, let moved = MovedMarker.refusal(in: configuration.dataDirectory) { throw moved }
        let checkpoints = try Self.checkpoints(configuration, logger: logger)
        eventLog = try JSONLinesEventLog(
            path: (configuration.dataDirectory as NSString).appendingPathComponent("events.log"),
            toStandardOutput: configuration.eventLogToStandardOutput, logID: configuration.eventLogID, chained: configuration.eventLogChain,
            checkpoints: checkpoints,
            segments: EventLogSegments.Settings(
                maxBytes: Int64(configuration.eventLogRotateBytes), interval: configuration.eventLogRotateInterval,
                retention: configuration.eventLogRetention, key: checkpoints?.key),
            clock: clock)
        let actionTarget = configuration.webhookURL == nil ? "accounts" : "webhook"
        metrics = ReceiverMetrics(
            factory: metricsFactory, version: configuration.build.version, commit: configuration.build.commit, actionTarget: actionTarget)
        let log: any EventLog = eventLog
        let noticeKeys = try ReceiverStorage.noticeKeys(configuration: configuration, logger: logger, clock: clock)
        storage = try ReceiverStorage.open(
            configuration: configuration, log: log, metrics: metrics, logger: logger, noticeKeys: noticeKeys, journal: true, clock: clock)
        let transmitters = try Self.transmitters(configuration, logger: logger, clock: clock)
        keys = transmitters[0].1.provider
        keySource = transmitters.count == 1 ? transmitters[0].1.source : .combined(transmitters.map { ($0.0.name, $0.1.source) })
        caches = transmitters.compactMap(\.1.cache)
        var intake = Intake(
            transmitters: Transmitters(transmitters.map(\.0), sharedPath: configuration.eventsPath), store: storage.events, log: log, metrics: metrics,
            clock: clock)
        // SSF verification events are matched against the requests risc made (only SSF
        // transmitters' are refused `invalid_state`; Google's are logged as before).
        if transmitters.contains(where: { $0.0.dialect == .ssf }) {
            intake.verifications = try storage.store.verifications()
            // The stream `risc stream create` recorded for each, read when a verification comes.
            let records = Dictionary(uniqueKeysWithValues: configuration.transmitters.map { ($0.name, $0.streamRecordPath(dataDirectory: configuration.dataDirectory)) })
            intake.knownStream = { name in
                records[name].flatMap { FileManager.default.contents(atPath: $0) }.flatMap { try? JSONParser.parseObject(Array($0)) }?["stream_id"]?.stringValue
            }
        }
        pollers = try Self.pollers(configuration, intake: intake, leases: storage.store.leases(), logger: logger)
        // HEAD answered wherever GET is (RFC 9110 §9.1), for health checks that send it.
        let adminRouter = Router(context: RISCRequestContext.self, options: .autoGenerateHeadEndpoints)
        let storeSampler = StoreSampler(store: storage.health, interval: configuration.healthSampleInterval, clock: clock)
        self.storeSampler = storeSampler
        let metricsSampler = MetricsSampler(keys: keySource, store: storeSampler, metrics: metrics, noticeKeys: noticeKeys)
        HealthController(keys: keySource, store: storeSampler, backend: storage.backendName, metrics: metrics, noticeKeys: noticeKeys)
            .register(on: adminRouter)
        // The account API beside health and metrics, or on a listener of its own (admin.api.port).
        let apiRouter = configuration.adminAPIPort == nil ? adminRouter : Router(context: RISCRequestContext.self, options: .autoGenerateHeadEndpoints)
        if let tokenFile = configuration.adminTokenFile {
            let token = try Self.readSecret(tokenFile, setting: "admin.token_file")  // its length: preflight
            // A shared store's calls within store.timeout, as a SET's.
            let accounts = try storage.store.accounts(within: configuration.store.timeout, clock: clock)
            AdminAccountsController(
                accounts: accounts, token: token,
                appFlip: configuration.linkingGoogleClientID.map {
                    AppFlipPolicy(clientID: $0, extraHosts: configuration.linkingAppFlipHosts, extraBundleIDs: configuration.linkingAppFlipBundleIDs)
                },
                notices: configuration.unlinkNotices(tokenKey: storage.tokenKey), log: log, clock: clock, retryAfter: configuration.retryAfter,
                logger: logger
            ).register(on: apiRouter)
        }
        // With every route added: another method on a path they serve is 405 with Allow, not 404.
        for router in configuration.adminAPIPort == nil ? [adminRouter] : [adminRouter, apiRouter] {
            router.add(middleware: MethodNotAllowed(router.routes))
        }

        // The admin listeners start once the public one is bound (`AfterPublicListener`): one signal each.
        let (adminGate, adminGateOpen) = AsyncStream.makeStream(of: Void.self)
        let (apiGate, apiGateOpen) = AsyncStream.makeStream(of: Void.self)
        let publicBound = [adminGateOpen, apiGateOpen]
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
                clock: clock)
        }
        let push = PushEndpoint(
            settings: Self.pushSettings(configuration, logger: logger),
            intake: intake, revocation: revocation,
            documents: configuration.noticeIssuer.flatMap { issuer in noticeKeys.map { NoticeDocuments(issuer: issuer, keys: $0) } },
            limiter: configuration.invalidPerMinute > 0 ? InvalidRequestLimiter(perMinute: configuration.invalidPerMinute) : nil,
            tls: tls, logger: logger, metrics: metrics, clock: clock,
            onRunning: { port in
                publicPort.yield(port)
                for bound in publicBound { bound.yield() }
            })
        func adminApplication(
            _ router: Router<RISCRequestContext>, setting: String, host: String, port: Int, ports: AsyncStream<Int>.Continuation,
            after gate: AsyncStream<Void>
        ) -> some Service {
            let application = Application(
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
            return AfterPublicListener(bound: gate, inner: NamedListener(inner: application, setting: setting, host: host, port: port))
        }
        let adminApp = adminApplication(
            adminRouter, setting: "admin.host, admin.port", host: configuration.adminHost, port: configuration.adminPort, ports: adminPort, after: adminGate)

        let retention = RetentionService(
            store: try storage.store.retention(), policy: configuration.retention, interval: configuration.retentionInterval, log: log, logger: logger,
            clock: clock)
        let storage = self.storage
        let reloader = source.map {
            ConfigurationReloader(
                source: $0, running: configuration, logLevel: logLevel, push: push, storage: storage, retention: retention, eventLog: log, logger: logger,
                clock: clock)
        }
        self.reloader = reloader
        onHangup = Hangup(
            eventLog: eventLog, tls: tls, adminTLS: adminTLS, metrics: metrics, logger: logger, configuration: reloader, clock: clock)
        // Started in this order; on SIGTERM stopped in the reverse one: the public listener drains
        // first, the storage (its workers, then the store) stops last.
        var services: [any Service] = [ReceiverStorage.StorageService(storage: storage), HangupHandler(hangup: onHangup)]
        for cache in caches { services.append(KeyRefresher(cache: cache)) }
        services.append(retention)
        services.append(HealthSamplerService(store: storeSampler, metrics: metrics.registry == nil ? metricsSampler : nil))
        services.append(adminApp)
        if let port = configuration.adminAPIPort {
            services.append(
                adminApplication(apiRouter, setting: "admin.api.host, admin.api.port", host: configuration.adminAPIHost, port: port, ports: apiPort, after: apiGate))
        } else {
            apiPort.finish()
        }
        services.append(NamedListener(inner: push, setting: "listen.host, listen.port", host: configuration.host, port: configuration.port))
        for poller in pollers { services.append(SSFPollerService(poller: poller)) }
        group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }

    /// Asks the store its health questions now, as the sampler does every
    /// `healthSampleInterval` seconds (`/readyz` and `/metrics` answer from the answers).
    public func sampleHealth() async { await storeSampler.sample() }

    /// Runs until SIGTERM/SIGINT (or `shutdown()`), then closes the store and the event log.
    public func run() async throws {
        for cache in caches { await cache.refreshNow() }  // warm the keys before the first request
        var startup = EventLogRecord(step: .serve, outcome: .started, time: clock())
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
            eventLog.record(EventLogRecord(step: .serve, outcome: .stopped, time: clock()))
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

/// Runs `inner` (an admin listener) once the public listener is bound. A public address that
/// cannot be taken then stops the start before the admin listener begins: started beside it, the
/// admin listener was cancelled mid-start and logged errors of its own (`Waiting on child channel:
/// CancellationError()`) above the one line that said what was wrong.
struct AfterPublicListener<Inner: Service>: Service {
    let bound: AsyncStream<Void>
    let inner: Inner

    func run() async throws {
        let bound = self.bound
        let open = await cancelWhenGracefulShutdown { () async -> Bool in
            for await _ in bound { return true }
            return false
        }
        guard open, !Task.isCancelled else { return }
        try await inner.run()
    }
}

/// Keeps the issuer's key set fresh until shutdown.
struct KeyRefresher: Service {
    let cache: JWKSCache
    func run() async throws {
        await cancelWhenGracefulShutdown { await cache.run() }
    }
}
