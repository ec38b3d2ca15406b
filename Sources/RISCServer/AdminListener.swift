import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOSSL
import RISCCore
import ServiceLifecycle
import Synchronization

/// The admin listener's protection against a client that holds it: at most
/// `admin.max_connections` connections (Hummingbird stops accepting past that, so more wait in
/// the kernel's backlog until one closes), at most `admin.max_connections_per_address` of them
/// from one client address (an IPv6 /64; more are closed on accept), `admin.handshake_timeout`
/// for a new connection's TLS handshake and the first byte of its request, and a deadline per
/// request after that. Before the per-address cap and the first-byte deadline, 64 idle TCP
/// connections from one address (no TLS handshake needed) denied health, metrics and the
/// account API to everyone, mutual TLS included.
///
/// Hummingbird already reads no more from a connection while its answers are not being read
/// (`NIOAsyncChannel`'s backpressure), so a client that pipelines without reading holds a bounded
/// amount of memory there; the tests check that too.
///
/// With `admin.tls.*` each connection starts with TLS from `ServerTLS` (so SIGHUP's reload reaches
/// new connections, as on the public listener), mutual when `admin.tls.client_ca` is set.
enum AdminListener {
    struct Limits: Sendable {
        var requestTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
        var maxConnectionsPerAddress: Int
    }

    static func server(limits: Limits, tls: ServerTLS? = nil) -> HTTPServerBuilder {
        let gate = AddressGate(limit: limits.maxConnectionsPerAddress)
        return HTTPServerBuilder { responder in
            GuardedAdminChannel(
                base: HTTP1Channel(
                    responder: responder, configuration: .init(additionalChannelHandlers: [AdminRequestDeadline(timeout: limits.requestTimeout)])),
                tls: tls, gate: gate, handshakeTimeout: limits.handshakeTimeout)
        }
    }
}

/// Counts an admin listener's open connections per address group; refuses past `limit` (0: no limit).
final class AddressGate: Sendable {
    let limit: Int
    private let open = Mutex<[String: Int]>([:])

    init(limit: Int) { self.limit = limit }

    /// Takes a place for `group`; false when it holds `limit` already.
    func enter(_ group: String) -> Bool {
        open.withLock { open in
            guard limit == 0 || open[group, default: 0] < limit else { return false }
            open[group, default: 0] += 1
            return true
        }
    }

    func leave(_ group: String) {
        open.withLock { open in
            open[group, default: 1] -= 1
            if open[group] == 0 { open[group] = nil }
        }
    }
}

/// An admin connection: refused on accept when its address holds its share already; then TLS
/// (the context `ServerTLS` holds now, read per connection) when configured, a deadline for the
/// handshake and first request byte, and the HTTP channel.
struct GuardedAdminChannel<Base: HTTPChannelHandler>: HTTPChannelHandler {
    typealias Value = Base.Value
    let base: Base
    let tls: ServerTLS?
    let gate: AddressGate
    let handshakeTimeout: TimeAmount

    struct PerAddressLimit: Error {}

    var responder: HTTPChannelHandler.Responder { base.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let group = AddressGroup.key(channel.remoteAddress) {
            guard gate.enter(group) else {
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(PerAddressLimit())
            }
            channel.closeFuture.whenComplete { [gate] _ in gate.leave(group) }
        }
        return channel.eventLoop.makeCompletedFuture {
            if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.context)) }
            try channel.pipeline.syncOperations.addHandler(FirstByteDeadline(timeout: handshakeTimeout))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            let codec = try channel.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self)
            try channel.pipeline.syncOperations.addHandler(ConnectionCloseRequest(), position: .before(codec))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Says a request's wish to end its connection the one way Hummingbird reads it. RFC 9112 §9.3: an
/// HTTP/1.0 request without `keep-alive`, or any request with the `close` option (`Connection:
/// Close`, `TE, close`), ends the connection with its answer; Hummingbird ends it only on a
/// `Connection` of exactly `close`, and kept the others open until admin.request_timeout, so a
/// health check that reads to the end (check_http, keepalived) waited 30 s. Such a request's
/// `Connection` becomes `close`, and its answer says `Connection: close` (§9.6).
final class ConnectionCloseRequest: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive else {
            context.fireChannelRead(data)
            return
        }
        closing = true
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard closing, case .head(var head) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}

/// Closes a connection on which no application byte arrived within `timeout` of its opening: a
/// TLS handshake never finished, or a connection that sends nothing. Removes itself at the
/// first byte (the request deadline takes over from there).
final class FirstByteDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timer?.cancel()
        timer = nil
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}

/// Closes an admin connection on which no whole request arrived within `timeout` of its opening
/// or of its previous answer: an idle keep-alive connection, a request trickled a header line at
/// a time, and one stalled half-way alike. Waiting for our own answer does not count.
final class AdminRequestDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let timeout: TimeAmount
    private var waitingSince = NIODeadline.now()
    private var answering = false
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        waitingSince = context.eventLoop.now
        schedule(context, at: waitingSince + timeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { answering = true }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answering = false
            waitingSince = context.eventLoop.now
        }
        context.write(data, promise: promise)
    }

    private func schedule(_ context: ChannelHandlerContext, at time: NIODeadline) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: time) { bound.value.handler.expire(bound.value.context) }
    }

    private func expire(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let due = waitingSince + timeout
        if answering {
            schedule(context, at: context.eventLoop.now + timeout)
        } else if due > context.eventLoop.now {
            schedule(context, at: due)
        } else {
            context.close(promise: nil)
        }
    }
}

/// A listener that cannot take its address, named by the setting that gives it: "address in use"
/// (another process holds the port; `temporary`, exit 69, as systemd may start it again once the
/// port is free) or one this machine will not give (a name that does not resolve, no such local
/// address, a port below 1024 without the capability: exit 64 like any configuration problem).
public struct ListenError: Error, CustomStringConvertible {
    public let setting: String
    public let host: String
    public let port: Int
    /// Why, in the operator's words.
    public let cause: String
    /// Whether the next try may succeed: the port in use, or a name server that did not answer.
    public let temporary: Bool

    public var description: String { "cannot listen on \(hostPort(host, port)) (\(setting)): \(cause)" }

    init(setting: String, host: String, port: Int, errno: Int32) {
        let cause =
            switch errno {
            case EADDRINUSE: "the address is in use (another process listens there)"
            case EACCES: "permission denied (a port below 1024 needs CAP_NET_BIND_SERVICE)"
            case EADDRNOTAVAIL: "no such address on this machine"
            default: String(cString: strerror(errno))
            }
        self.init(setting: setting, host: host, port: port, cause: cause, temporary: errno == EADDRINUSE)
    }

    init(setting: String, host: String, port: Int, cause: String, temporary: Bool = false) {
        (self.setting, self.host, self.port, self.cause, self.temporary) = (setting, host, port, cause, temporary)
    }

    /// `error` as a `ListenError` when it is a bind failure or a name that did not resolve, else nil.
    static func from(_ error: any Error, setting: String, host: String, port: Int) -> ListenError? {
        if error is SocketAddressError.UnknownHost { return ListenError(setting: setting, host: host, port: port, cause: "the name does not resolve") }
        guard let error = error as? IOError, [EADDRINUSE, EACCES, EADDRNOTAVAIL].contains(error.errnoCode) else { return nil }
        return ListenError(setting: setting, host: host, port: port, errno: error.errnoCode)
    }

    /// What would stop a listener on `host` before it binds its port (`--check-config` and the
    /// start's preflight): a name that does not resolve, an address that is not this machine's.
    /// The address is resolved as the listener resolves it and bound with port 0, which takes no
    /// port (a receiver running on the configured one is no problem). Nil: none found.
    static func probe(setting: String, host: String, port: Int) -> ListenError? {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, "0", &hints, &found)
        guard status == 0, let address = found?.pointee else {
            let why = String(cString: gai_strerror(status))
            return ListenError(setting: setting, host: host, port: port, cause: "the name does not resolve (\(why))", temporary: status == EAI_AGAIN)
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(address.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }  // the start will say
        defer { close(descriptor) }
        guard bind(descriptor, address.ai_addr, address.ai_addrlen) != 0 else { return nil }
        return ListenError(setting: setting, host: host, port: port, errno: errno)
    }
}

/// A listener's service whose failure to bind is said as a `ListenError` naming its setting.
struct NamedListener<Inner: Service>: Service {
    let inner: Inner
    let setting: String
    let host: String
    let port: Int

    func run() async throws {
        do { try await inner.run() } catch {
            throw ListenError.from(error, setting: setting, host: host, port: port) ?? error
        }
    }
}
