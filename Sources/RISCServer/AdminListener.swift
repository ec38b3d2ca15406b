import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import NIOSSL

/// The admin listener's protection against a client that holds it: at most
/// `admin.max_connections` connections (Hummingbird stops accepting past that, so more wait in
/// the kernel's backlog until one closes), and a deadline per request.
///
/// Hummingbird already reads no more from a connection while its answers are not being read
/// (`NIOAsyncChannel`'s backpressure), so a client that pipelines without reading holds a bounded
/// amount of memory there; the tests check that too.
///
/// With `admin.tls.*` each connection starts with TLS from `ServerTLS` (so SIGHUP's reload reaches
/// new connections, as on the public listener), mutual when `admin.tls.client_ca` is set.
enum AdminListener {
    static func server(requestTimeout: TimeAmount, tls: ServerTLS? = nil) -> HTTPServerBuilder {
        let http = HTTPServerBuilder.http1(configuration: .init(additionalChannelHandlers: [AdminRequestDeadline(timeout: requestTimeout)]))
        guard let tls else { return http }
        return HTTPServerBuilder { responder in
            ReloadableTLSChannel(base: HTTP1Channel(
                responder: responder, configuration: .init(additionalChannelHandlers: [AdminRequestDeadline(timeout: requestTimeout)])),
                tls: tls)
        }
    }
}

/// An HTTP child channel behind TLS whose context is `ServerTLS`'s current one, read per connection.
struct ReloadableTLSChannel<Base: HTTPChannelHandler>: HTTPChannelHandler {
    typealias Value = Base.Value
    let base: Base
    let tls: ServerTLS

    var responder: HTTPChannelHandler.Responder { base.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
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
        waitingSince = .now()
        schedule(context, at: waitingSince + timeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { answering = true }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answering = false
            waitingSince = .now()
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
            schedule(context, at: .now() + timeout)
        } else if due > .now() {
            schedule(context, at: due)
        } else {
            context.close(promise: nil)
        }
    }
}
