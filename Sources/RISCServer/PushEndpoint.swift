import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RISCCore
import ServiceLifecycle
import Synchronization

/// The public RFC 8935 push endpoint, straight on SwiftNIO: `POST` the compact SET, get 202 once
/// it is on disk.
///
/// Built for throughput. A request never enters Swift concurrency: its body is verified on the
/// connection's event loop (the signing key is normally held; a key that must be fetched first
/// goes through a task), handed to the store's group-commit writer, and answered from the
/// writer's callback back on the same event loop. Everything else (health, metrics, the account
/// API) is on the admin listener, over Hummingbird.
///
/// Shutdown (SIGTERM/SIGINT): stop accepting, let every request already read be answered, close
/// idle keep-alive connections (NIO's quiescing), then return, so the store closes after the
/// last acknowledgement.
final class PushEndpoint: Service, Sendable {
    /// Where the listener is and what it serves: fixed for the process's life.
    struct Settings: Sendable {
        var host: String
        var port: Int
        var path: String
        /// The RFC 7009 revocation endpoint's path (`linking.revocation_path`), when it is served.
        var revocationPath: String?
        /// The limits the listener starts with; `PushEndpoint.limits` holds those in force.
        var limits: Limits

        init(
            host: String, port: Int, path: String, revocationPath: String? = nil, maxBodyBytes: Int, retryAfter: Int,
            trustedProxies: TrustedProxies, requestTimeout: TimeAmount = .seconds(60), drainTimeout: Duration = .seconds(20),
            maxConnections: Int = 1_024, maxConnectionsPerAddress: Int = 0
        ) {
            self.init(
                host: host, port: port, path: path, revocationPath: revocationPath,
                limits: Limits(
                    maxBodyBytes: maxBodyBytes, retryAfter: retryAfter, trustedProxies: trustedProxies, requestTimeout: requestTimeout,
                    drainTimeout: drainTimeout, maxConnections: maxConnections, maxConnectionsPerAddress: maxConnectionsPerAddress))
        }

        init(host: String, port: Int, path: String, revocationPath: String?, limits: Limits) {
            (self.host, self.port, self.path, self.revocationPath, self.limits) = (host, port, path, revocationPath, limits)
        }
    }

    let settings: Settings
    /// The limits in force; SIGHUP may replace them (`reload`).
    /// (Read and replaced in `PushEndpoint+Limits.swift`.)
    let live: Mutex<(limits: Limits, limiter: InvalidRequestLimiter?)>
    var limits: Limits { live.withLock { $0.limits } }
    /// Refused requests per address and minute before 429 (`limits.invalid_per_minute`); nil: off.
    var limiter: InvalidRequestLimiter? { live.withLock { $0.limiter } }
    let intake: Intake
    /// Google's unlink calls (issue 15 §2), on `settings.revocationPath`.
    let revocation: RevocationIntake?

    /// The site's discovery document and JWKS for unlink notices, when they are on.
    let documents: NoticeDocuments?

    let tls: ServerTLS?
    let logger: Logger
    let metrics: ReceiverMetrics?
    let onRunning: @Sendable (Int) -> Void
    /// Open connections, and how many each peer address holds.
    struct Connections {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var byAddress: [String: Int] = [:]
    }
    let connections = Mutex(Connections())
    /// Why a connection was closed on accept.
    enum Refusal: String, CaseIterable {
        case total = "max_connections"
        case perAddress = "max_connections_per_address"
    }
    /// Connections refused since the last report of them, and when that was, by reason.
    let refusals = Mutex<[Refusal: (unreported: Int, reportedAt: Double)]>([:])
    private let group = MultiThreadedEventLoopGroup.singleton
    /// Bounds the event-log lines of refused requests (see `RejectionSampler`).
    let rejections = RejectionSampler()
    /// Why SETs are being answered 503 (nil: they are not), so the first 503 of an outage and the
    /// first 202 after it are logged at the default level, not every one in between.
    let unavailability = Mutex<String?>(nil)
    /// Now, in seconds since the epoch: the invalid-request limiter's and the refused lines'
    /// sampling windows, and those lines' times (tests drive it).
    let now: @Sendable () -> Double

    init(
        settings: Settings, intake: Intake, revocation: RevocationIntake? = nil, documents: NoticeDocuments? = nil, limiter: InvalidRequestLimiter?, tls: ServerTLS?,
        logger: Logger, metrics: ReceiverMetrics? = nil, clock: @escaping @Sendable () -> Double = systemNow,
        onRunning: @escaping @Sendable (Int) -> Void
    ) {
        self.now = clock
        self.settings = settings
        self.live = Mutex((settings.limits, limiter))
        self.revocation = revocation
        self.documents = documents
        self.tls = tls
        self.logger = logger
        self.metrics = metrics
        self.onRunning = onRunning
        var intake = intake
        intake.rejections = rejections
        self.intake = intake
        metrics?.setConnectionLimit(settings.limits.maxConnections)
    }

    func run() async throws {
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // At the TCP level: `.socketOption(.tcp_nodelay)` is SOL_SOCKET's option 1, SO_DEBUG, which
            // only CAP_NET_ADMIN may set (every connection of an unprivileged receiver was reset).
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // A client that half-closes after its request still gets the answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try self.configure(channel) }
            }
            .bind(host: settings.host, port: settings.port).get()
        onRunning(server.localAddress?.port ?? 0)
        let summaries = server.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(10), delay: .seconds(10)) { [self] _ in
            writeSuppressedSummaries()
        }
        try? await gracefulShutdown()
        try? await server.close()
        await drain()
        summaries.cancel()
        writeSuppressedSummaries()
    }
}
