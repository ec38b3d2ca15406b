import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RISCCore
import Synchronization

/// Carries out `PushConnection`'s decisions on a channel: reads, writes, closes, the request
/// timer, and the routes a whole request goes to (the push endpoint's intake, the revocation
/// endpoint, the notice documents), whose answers go back to the state machine.
final class PushHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: PushEndpoint
    private var connection: PushConnection
    /// The connection's one timer for `requestTimeout`.
    private var deadline: Scheduled<Void>?
    /// The connection's peer, once read.
    private var knownPeer: PushEndpoint.Peer?
    /// Its answers' `Date` field (RFC 9110 §6.6.1) and the second it was formatted for: once a
    /// second at most, on the receiver's clock.
    private var date: (second: Double, field: String)?

    init(endpoint: PushEndpoint) {
        self.endpoint = endpoint
        self.connection = PushConnection(limits: PushConnection.Limits(endpoint.limits), now: .now())
    }

    private func peer(_ context: ChannelHandlerContext) -> PushEndpoint.Peer {
        if let knownPeer { return knownPeer }
        let peer = PushEndpoint.Peer(context.channel.remoteAddress)
        if peer.ip != nil { knownPeer = peer }
        return peer
    }

    private func channel(_ context: ChannelHandlerContext) -> PushConnection.Channel {
        PushConnection.Channel(writable: context.channel.isWritable, active: context.channel.isActive, now: context.eventLoop.now)
    }

    /// Carries out `actions` in order.
    private func run(_ actions: [PushConnection.Action], _ context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .read: context.read()
            case .close: context.close(promise: nil)
            case .sendContinue(let version):
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .continue))), promise: nil)
            case .dispatch(let head, let body): dispatch(context, head, body)
            case .write(let head, let body, let closeAfter): write(context, head, body: body, closeAfter: closeAfter)
            case .refused(let head, let route):
                let remote = endpoint.clientAddress(peer(context), headers: head.headers)
                if case .badRequest(let description) = route {
                    endpoint.malformedRequest(SETError(.invalidRequest, description), remote: remote)
                } else {
                    endpoint.refused(route.status, path: head.uri, remote: remote)
                }
            case .tooLarge(let head): tooLarge(context, head)
            case .overflowed: endpoint.overflowed(remote: endpoint.clientAddress(peer(context), headers: [:]))
            case .schedule(let time): schedule(context, at: time)
            }
        }
    }

    // MARK: Channel events

    func read(context: ChannelHandlerContext) {
        run(connection.read(channel(context)), context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        run(connection.writabilityChanged(channel(context)), context)
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.limits = PushConnection.Limits(endpoint.limits)
        let part: PushConnection.Part
        switch unwrapInboundIn(data) {
        case .head(let head): part = .head(head, route(head))
        case .body(let body): part = .body(body)
        case .end: part = .end
        }
        run(connection.received(part, channel(context)), context)
    }

    /// What the endpoint serves at `head`'s path, for the state machine.
    private func route(_ head: HTTPRequestHead) -> PushConnection.Route {
        if let problem = PushEndpoint.headProblem(head) { return .badRequest(problem) }
        guard let route = endpoint.route(head) else { return .notFound }
        guard route.methods.contains(head.method) else { return .methodNotAllowed(allow: route.methods.map(\.rawValue).joined(separator: ", ")) }
        return .served
    }

    func channelActive(context: ChannelHandlerContext) {
        run(connection.opened(channel(context)), context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        connection.closed()
        context.fireChannelInactive()
    }

    private func schedule(_ context: ChannelHandlerContext, at time: NIODeadline) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(deadline: time) {
            let (handler, context) = bound.value
            handler.connection.limits = PushConnection.Limits(handler.endpoint.limits)
            handler.run(handler.connection.timerFired(handler.channel(context)), context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent { return run(connection.quiesce(), context) }
        if case ChannelEvent.inputClosed = event { return run(connection.inputClosed(channel(context)), context) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A parser error on a closed channel is the decoder flushing a partial request after our
        // own close (an overflowing client): nothing to answer or report.
        guard context.channel.isActive else { return }
        guard let parserError = error as? HTTPParserError else {
            endpoint.logger.debug("push connection error", metadata: ["risc.error": "\(Printable.safe("\(error)"))"])
            context.close(promise: nil)
            return
        }
        let problem = SETError(.invalidRequest, "malformed HTTP request: \(Self.describe(parserError))")
        endpoint.malformedRequest(problem, remote: endpoint.clientAddress(peer(context), headers: [:]))
        run(connection.malformed(problem, channel(context)), context)
    }

    /// What is wrong with a request the parser refused, in words that name the fault rather than
    /// the parser's own names (its `unknown` is mostly faulty framing, `paused` an HTTP/2 preface).
    static func describe(_ error: HTTPParserError) -> String {
        switch error {
        case .unknown, .invalidEOFState:
            "its framing is invalid (Content-Length beside Transfer-Encoding, chunked not the last transfer coding: RFC 9112 §6.1, §6.3)"
        case .unexpectedContentLength: "more than one Content-Length field (RFC 9112 §6.3)"
        case .invalidContentLength: "Content-Length is not one decimal number, or stands beside Transfer-Encoding (RFC 9112 §6.1, §6.3)"
        case .paused: "an HTTP/2 connection preface or upgrade: this endpoint speaks HTTP/1.1"
        case .invalidHeaderToken: "a header field with a character HTTP does not allow (a space before the colon, a folded line, a control character)"
        case .headerOverflow: "its header section is too large"
        case .invalidChunkSize: "a chunk size that is not a hexadecimal number"
        case .invalidVersion, .lfExpected: "not an HTTP/1.x request (each line must end with CRLF)"
        case .invalidMethod: "not an HTTP method"
        case .invalidURL: "its target is not a valid URI"
        default: Printable.safe(String(describing: error), maxBytes: 80)
        }
    }

    // MARK: Requests

    /// Hands a whole request's answer back to the state machine.
    private func answer(_ context: ChannelHandlerContext, _ answer: PushConnection.Answer) {
        run(connection.answered(answer, channel(context)), context)
    }

    /// Reports a body over the limit (its 413 is the state machine's).
    private func tooLarge(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let remote = endpoint.clientAddress(peer(context), headers: head.headers)
        var record = endpoint.rejectedRecord(status: .payloadTooLarge, remote: remote)
        record["description"] = .string("body larger than \(endpoint.limits.maxBodyBytes) bytes")
        endpoint.reject(record, outcome: "too_large")
        if let limiter = endpoint.limiter, let remote { limiter.recordInvalid(remote, now: endpoint.now()) }
    }

    /// A whole request to its route: the revocation endpoint, a notice document, or the intake.
    private func dispatch(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ body: ByteBuffer) {
        let remote = endpoint.clientAddress(peer(context), headers: head.headers)
        if let limited = limited(remote) { return answer(context, limited) }
        let path: String?
        switch endpoint.route(head) {
        case .revocation(let revocation)?: return revoke(context, head, body, remote, revocation)
        case .document(let documents, let document)?:
            let answer = documents.answer(document)
            return self.answer(context, PushConnection.Answer(status: answer.status, headers: answer.headers, body: answer.body))
        case .events(let served)?: path = served
        case nil: path = nil
        }
        let delivery = Intake.Delivery(
            body: Array(buffer: body), remoteAddress: remote, contentType: head.headers.first(name: "content-type"), path: path,
            authorization: head.headers.first(name: "authorization"), contentEncoding: head.headers.first(name: "content-encoding"),
            transferCodings: PushEndpoint.undecodedTransferCodings(head))
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: eventLoop)
        endpoint.intake.receive(delivery, hop: { eventLoop.execute($0) }) { result in
            if eventLoop.inEventLoop {
                bound.value.handler.stored(bound.value.context, remote, result)
            } else {
                eventLoop.execute { bound.value.handler.stored(bound.value.context, remote, result) }
            }
        }
    }

    /// A call to the revocation endpoint: answered once its record is on disk (or refused).
    private func revoke(
        _ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ body: ByteBuffer, _ remote: String?, _ revocation: RevocationIntake
    ) {
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: eventLoop)
        revocation.receive(
            body: Array(buffer: body), contentType: head.headers.first(name: "content-type"), authorization: head.headers.first(name: "authorization"),
            contentEncoding: head.headers.first(name: "content-encoding"), transferCodings: PushEndpoint.undecodedTransferCodings(head), remote: remote,
            retryAfter: endpoint.limits.retryAfter
        ) { answer in
            eventLoop.execute {
                let (handler, context) = bound.value
                if let refusal = answer.refusal {
                    handler.endpoint.reject(refusal, outcome: "rejected")
                    if let limiter = handler.endpoint.limiter, let remote { limiter.recordInvalid(remote, now: handler.endpoint.now()) }
                }
                handler.answer(
                    context, PushConnection.Answer(status: HTTPResponseStatus(statusCode: answer.status), headers: answer.headers, body: answer.body))
            }
        }
    }

    /// The 429 when the invalid-request limiter holds `remote` back; nil when it does not.
    private func limited(_ remote: String?) -> PushConnection.Answer? {
        guard let limiter = endpoint.limiter, let remote, let limited = limiter.check(remote, now: endpoint.now()) else { return nil }
        if let count = limited.log {
            var record = EventLogRecord(step: .received, outcome: .limited, time: endpoint.now())
            record["remote"] = .string(remote)
            record["http_status"] = 429
            record["count"] = .number(Double(count))
            endpoint.reject(record, outcome: "limited")
        } else {
            endpoint.intake.metrics?.observe(outcome: "limited", err: nil, verifySeconds: nil, commitSeconds: nil)
        }
        return PushConnection.Answer(status: .tooManyRequests, headers: [("Retry-After", String(max(1, limited.retryAfter)))])
    }

    /// The intake's result as an answer: 202 once stored, the RFC 8935 400, or 503 for our own
    /// temporary fault.
    private func stored(_ context: ChannelHandlerContext, _ remote: String?, _ result: Result<AppendOutcome, any Error>) {
        switch result {
        case .success:
            if let reason = endpoint.becameAvailable() { endpoint.logger.notice("accepting SETs again", metadata: ["risc.after": "\(reason)"]) }
            answer(context, PushConnection.Answer(status: .accepted))
        case .failure(let error as SETError):
            endpoint.logger.debug("SET rejected", metadata: ["risc.err": "\(error.code)"])
            if let limiter = endpoint.limiter, let remote { limiter.recordInvalid(remote, now: endpoint.now()) }
            var headers = [("Content-Type", "application/json"), ("Content-Language", "en")]
            if let challenge = error.challenge { headers.append(("WWW-Authenticate", challenge)) }
            if error.status == 415 { headers.append(("Accept-Encoding", "identity")) }  // the codings that would do (RFC 9110 §15.5.16)
            answer(context, PushConnection.Answer(status: HTTPResponseStatus(statusCode: error.status), headers: headers, body: error.responseBody))
        case .failure(let error as KeyUnavailableError):
            if endpoint.becameUnavailable("no usable key set") {
                endpoint.logger.warning("no usable key set; answering 503", metadata: ["risc.error": "\(Printable.safe(error.description))"])
            }
            answer(context, unavailable(reason: "signing keys are temporarily unavailable"))
        case .failure(let error):
            if endpoint.becameUnavailable("store failing") {
                endpoint.logger.error("cannot store the SET; answering 503", metadata: ["risc.error": "\(Printable.safe("\(error)"))"])
            }
            answer(context, unavailable(reason: "the receiver cannot store events right now"))
        }
    }

    /// Our own temporary fault: 503 with `Retry-After`, so the transmitter tries again. The body
    /// has the 400's shape (`err`, `description`).
    private func unavailable(reason: String) -> PushConnection.Answer {
        var body = JSONObject()
        body["err"] = "temporarily_unavailable"
        body["description"] = .string(reason)
        return PushConnection.Answer(
            status: .serviceUnavailable, headers: [("Content-Type", "application/json"), ("Retry-After", String(endpoint.limits.retryAfter))],
            body: JSONValue.object(body).serialized)
    }

    /// Writes a whole response; `closeAfter`: closes the connection once it is written.
    private func write(_ context: ChannelHandlerContext, _ head: HTTPResponseHead, body: String?, closeAfter: Bool) {
        var head = head
        let second = endpoint.now().rounded(.down)
        if date?.second != second { date = (second, Timestamp.httpDate(second)) }
        if let date { head.headers.add(name: "Date", value: date.field) }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil) }
        guard closeAfter else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

extension PushConnection.Limits {
    /// A connection's share of the listener's limits in force.
    init(_ limits: PushEndpoint.Limits) {
        self.init(maxBodyBytes: limits.maxBodyBytes, maxQueuedBytes: limits.maxQueuedBytes, requestTimeout: limits.requestTimeout)
    }
}
