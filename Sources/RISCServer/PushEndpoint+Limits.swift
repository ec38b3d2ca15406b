import NIOCore
import Synchronization

extension PushEndpoint {
    /// What SIGHUP may change (`reload`): read per request, connection or stop.
    struct Limits: Sendable {
        var maxBodyBytes: Int
        var retryAfter: Int
        /// Peers whose `X-Forwarded-For` is believed (reverse proxies).
        var trustedProxies: TrustedProxies
        /// A request must arrive whole within this long of the connection's previous answer (or
        /// of its opening), else the connection is closed: an idle keep-alive connection, a
        /// request that stalls half-way, and one trickled a byte at a time alike.
        var requestTimeout: TimeAmount
        /// How long shutdown waits for requests in flight before closing their connections.
        var drainTimeout: Duration
        /// Connections held at once; one more is closed as soon as it is accepted.
        var maxConnections: Int
        /// Connections one peer address (an IPv6 peer's /64) may hold at once (0: no such limit).
        /// Trusted proxies are exempt: every client behind them shares their address.
        var maxConnectionsPerAddress: Int
        /// Bytes of pipelined requests a connection may have waiting (read, not yet answered)
        /// before it is closed.
        var maxQueuedBytes: Int { 4 * maxBodyBytes }
    }

    /// Reloaded limits (SIGHUP): body size, `Retry-After`, trusted proxies, timeouts and connection
    /// caps for what arrives from now on (the listener's address and paths are `settings`, fixed).
    /// The invalid-request limiter starts afresh only when its rate changed.
    func reload(_ new: Limits, invalidPerMinute: Int) {
        live.withLock { live in
            live.limits = new
            if Int(live.limiter?.capacity ?? 0) != invalidPerMinute {
                live.limiter = invalidPerMinute > 0 ? InvalidRequestLimiter(perMinute: invalidPerMinute) : nil
            }
        }
        metrics?.setConnectionLimit(new.maxConnections)
    }
}
