import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RISCCore
import Synchronization

/// The public listener's connections: each one counted against `limits.max_connections` and
/// `limits.max_connections_per_address` as it is accepted (closed at once when over, reported once
/// a minute), given TLS and HTTP, and drained on shutdown.
extension PushEndpoint {
    /// Sets up one accepted connection: counted against the limits, TLS, HTTP, `PushHandler`.
    func configure(_ channel: any Channel) throws {
        let id = ObjectIdentifier(channel)
        let peer = AddressGroup.ip(channel.remoteAddress)
        let limits = self.limits  // one read of the reloadable limits for the whole decision
        let limited =
            limits.maxConnectionsPerAddress > 0 && !limits.trustedProxies.contains(peer)
            ? AddressGroup.key(channel.remoteAddress) : nil
        let refusal = connections.withLock { connections -> Refusal? in
            guard connections.channels.count < limits.maxConnections else { return .total }
            if let limited {
                guard connections.byAddress[limited, default: 0] < limits.maxConnectionsPerAddress else { return .perAddress }
                connections.byAddress[limited, default: 0] += 1
            }
            connections.channels[id] = channel
            return nil
        }
        if let refusal {
            refused(channel, refusal, peer: peer)
            throw ConnectionLimitReached()
        }
        metrics?.connectionOpened()
        channel.closeFuture.whenComplete { [weak self] _ in
            guard let self else { return }
            connections.withLock { connections in
                connections.channels.removeValue(forKey: id)
                if let limited {
                    connections.byAddress[limited, default: 1] -= 1
                    if connections.byAddress[limited] == 0 { connections.byAddress.removeValue(forKey: limited) }
                }
            }
            metrics?.connectionClosed()
        }
        let pipeline = channel.pipeline.syncOperations
        if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls.context)) }
        // No pipelining helper: it stops reading while a response is pending, two epoll changes a
        // request. PushHandler queues a pipelined request itself.
        // Malformed HTTP is answered by PushHandler itself (after any request read before it, as
        // JSON, logged and counted), not by NIO's bare 400.
        try pipeline.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false)
        try pipeline.addHandler(PushHandler(endpoint: self))
    }

    /// Over `maxConnections`: NIO closes the channel when its initializer throws this.
    struct ConnectionLimitReached: Error {}

    /// Counts a connection closed for being over a limit; the first of each kind, then at most one
    /// a minute, is reported in the event log and the server log with how many there were.
    func refused(_ channel: any Channel, _ refusal: Refusal, peer: String?) {
        metrics?.connectionRefused(refusal)
        let now = self.now()
        let count = refusals.withLock { refusals -> Int? in
            var entry = refusals[refusal] ?? (0, 0)
            entry.unreported += 1
            let due = hasPassed(60, since: entry.reportedAt, now: now)
            refusals[refusal] = due ? (0, now) : entry
            return due ? entry.unreported : nil
        }
        guard let count else { return }
        let limits = self.limits
        let limit = refusal == .total ? limits.maxConnections : limits.maxConnectionsPerAddress
        var record = EventLogRecord(step: .connection, outcome: .refused, time: now)
        record["reason"] = .string(refusal.rawValue)
        record["count"] = .number(Double(count))
        record["limit"] = .number(Double(limit))
        if let peer { record["remote"] = .string(peer) }
        intake.log.record(record)
        logger.warning(
            "public listener at limits.\(refusal.rawValue): closing new connections",
            metadata: ["risc.limit": "\(limit)", "risc.refused": "\(count)", "risc.remote": "\(peer ?? "-")"])
    }

    /// Asks every connection to close once its current request is answered (idle ones close at
    /// once), then waits for them, up to `drainTimeout` on the receiver's clock.
    func drain() async {
        for channel in connections.withLock({ Array($0.channels.values) }) {
            channel.eventLoop.execute { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        }
        let deadline = now() + limits.drainTimeout.seconds
        while !connections.withLock({ $0.channels.isEmpty }), now() < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        for channel in connections.withLock({ Array($0.channels.values) }) { channel.close(promise: nil) }
    }
}
