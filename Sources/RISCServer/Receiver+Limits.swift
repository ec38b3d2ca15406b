import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The public listener's settings and its connection limit within the process's open-file limit.
extension Receiver {
    /// The public listener's settings from `configuration`, at the start.
    static func pushSettings(_ configuration: ReceiverConfiguration, logger: Logger) -> PushEndpoint.Settings {
        PushEndpoint.Settings(
            host: configuration.host, port: configuration.port, path: configuration.eventsPath,
            revocationPath: configuration.linkingRevocationPath, limits: pushLimits(configuration, logger: logger))
    }

    /// The public listener's limits from `configuration` (at the start, and again on SIGHUP).
    static func pushLimits(_ configuration: ReceiverConfiguration, logger: Logger) -> PushEndpoint.Limits {
        PushEndpoint.Limits(
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
}
