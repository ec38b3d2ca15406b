import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RISCCore
import Synchronization

/// One connection's requests, one at a time: parts of a request pipelined behind one still being
/// answered wait in `queued` (bounded) until it is.
///
/// Backpressure: while the connection is not writable (the client does not read its answers),
/// no further request is answered and no more is read from the socket (`read` is held until the
/// channel is writable again); what was already read waits in `queued`, and a client whose queue
/// passes its bound is closed. So a client that pipelines and never reads holds at most the
/// channel's write buffer and one bounded queue, not memory without end.
final class PushHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        case idle
        /// Reading the body of a POST on the events path.
        case receiving(HTTPRequestHead, ByteBuffer)
        /// A request answered by its head alone (404, 405), once its end arrives; its body is
        /// dropped, and one longer than `maxBodyBytes` is answered at once and the connection closed.
        case refusing(HTTPRequestHead, HTTPResponseStatus, dropped: Int)
        /// Answered 413; the rest of the body is read and dropped (up to a limit), then the
        /// connection closes.
        case discarding(Int)
        /// Waiting for the intake (verification, then the store's commit).
        case answering
    }

    private let endpoint: PushEndpoint
    private var state = State.idle
    /// Parts that arrived while a request was being answered (or the client was not reading its
    /// answers), with their bytes counted.
    private var queued = CircularBuffer<HTTPServerRequestPart>()
    private var queuedBytes = 0
    /// Shutdown asked this connection to end after the request in hand.
    private var closing = false
    /// The client closed its sending side: answer what was read, then close.
    private var inputClosed = false
    /// A decoding error (malformed HTTP) to answer once everything read before it is answered.
    private var malformed: SETError?
    /// `read` was asked for while the channel was not writable; issued once it is.
    private var readHeld = false
    /// When the wait for the next request began: the connection's opening or its last answer.
    private var waitingSince = NIODeadline.now()
    /// The connection's one timer for `requestTimeout`.
    private var deadline: Scheduled<Void>?
    /// How much of an oversized body is read and dropped before the connection is simply closed.
    private static let discardLimit = 1 << 20
    /// Parts a connection may have waiting before it is closed.
    private static let maxQueuedParts = 1_024

    init(endpoint: PushEndpoint) { self.endpoint = endpoint }

    // MARK: Backpressure

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable { context.read() } else { readHeld = true }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            resume(context)
            if readHeld, context.channel.isActive {
                readHeld = false
                context.read()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if case .answering = state {
            enqueue(part, context)
        } else if !queued.isEmpty || (!context.channel.isWritable && Self.producesAnswer(part, state)) {
            enqueue(part, context)
        } else {
            handle(part, context)
        }
    }

    /// Whether handling `part` in `state` may write an answer (body parts of a request being
    /// read do not, so they need not wait for the client to read).
    private static func producesAnswer(_ part: HTTPServerRequestPart, _ state: State) -> Bool {
        if case .body = part, case .receiving = state { return false }
        return true
    }

    /// Holds a part back; a client that has more than a few requests' worth waiting is not a
    /// transmitter, and is closed.
    private func enqueue(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        queuedBytes += Self.size(of: part)
        queued.append(part)
        if queuedBytes > endpoint.limits.maxQueuedBytes || queued.count > Self.maxQueuedParts {
            endpoint.overflowed(remote: endpoint.clientAddress(peer: context.channel.remoteAddress, headers: [:]))
            queued.removeAll()
            queuedBytes = 0
            context.close(promise: nil)
        }
    }

    /// What a part holds in memory, roughly: its body bytes, or its head's URI and fields.
    private static func size(of part: HTTPServerRequestPart) -> Int {
        switch part {
        case .head(let head): 64 + head.uri.utf8.count + head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        case .body(let buffer): buffer.readableBytes
        case .end: 16
        }
    }

    /// Handles parts held back while a request was answered, until one needs answering again
    /// or the client stops reading; then whatever was left for the end (a malformed request's
    /// 400, a half-closed client's close).
    private func resume(_ context: ChannelHandlerContext) {
        if closing {  // shutting down: a pipelined request not yet answered is left to its retry
            queued.removeAll()
            queuedBytes = 0
            return
        }
        while !queued.isEmpty {
            if case .answering = state { return }
            if !context.channel.isWritable, Self.producesAnswer(queued.first!, state) { return }
            let part = queued.removeFirst()
            queuedBytes -= Self.size(of: part)
            handle(part, context)
        }
        finishIfDone(context)
    }

    /// Everything read has been answered: answer a malformed request, or close a half-closed
    /// connection.
    private func finishIfDone(_ context: ChannelHandlerContext) {
        guard queued.isEmpty, context.channel.isActive else { return }
        switch state {
        case .idle, .refusing, .receiving: break
        case .answering, .discarding: return
        }
        if let error = malformed {
            malformed = nil
            state = .idle
            badRequest(context, Self.fallbackHead, error, close: true)
        } else if inputClosed, case .idle = state {
            context.close(promise: nil)
        }
    }

    /// For answers that belong to no request head (malformed HTTP).
    private static let fallbackHead = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/")

    private func handle(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            let declared = head.headers.first(name: "content-length").flatMap { Int($0) }
            let route = endpoint.route(head)
            let maxBodyBytes = endpoint.limits.maxBodyBytes
            if route == nil {
                state = .refusing(head, .notFound, dropped: 0)
            } else if let route, !route.methods.contains(head.method) {
                state = .refusing(head, .methodNotAllowed, dropped: 0)
            } else if let declared, declared > maxBodyBytes {
                tooLarge(context, head)
            } else {
                if Self.expectsContinue(head) {
                    context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
                }
                state = .receiving(head, context.channel.allocator.buffer(capacity: min(declared ?? 2048, maxBodyBytes)))
            }
        case .body(var part):
            switch state {
            case .receiving(let head, var body):
                if body.readableBytes + part.readableBytes > endpoint.limits.maxBodyBytes {
                    tooLarge(context, head)
                    return
                }
                state = .answering  // drop the state's reference so the append does not copy
                body.writeBuffer(&part)
                state = .receiving(head, body)
            case .refusing(let head, let status, let dropped):
                let total = dropped + part.readableBytes
                guard total > endpoint.limits.maxBodyBytes else {
                    state = .refusing(head, status, dropped: total)
                    return
                }
                state = .discarding(total)
                respond(context, head, status, headers: headers(for: status, head), close: true, closeNow: false)
            case .discarding(let dropped):
                let total = dropped + part.readableBytes
                if total > Self.discardLimit { context.close(promise: nil) }
                state = .discarding(total)
            default:
                break
            }
        case .end:
            switch state {
            case .receiving(let head, let body):
                state = .answering
                receive(context, head, body)
            case .refusing(let head, let status, _):
                state = .idle
                endpoint.refused(status, path: head.uri, remote: endpoint.clientAddress(peer: context.channel.remoteAddress, headers: head.headers))
                respond(context, head, status, headers: headers(for: status, head))
            case .discarding:
                context.close(promise: nil)
            default:
                break
            }
        }
    }

    /// The client waits for `100 Continue` before it sends the body.
    private static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        head.headers.first(name: "expect")?.lowercased() == "100-continue"
    }

    private func headers(for status: HTTPResponseStatus, _ head: HTTPRequestHead) -> [(String, String)] {
        guard status == .methodNotAllowed, let route = endpoint.route(head) else { return [] }
        return [("Allow", route.methods.map(\.rawValue).joined(separator: ", "))]
    }

    func channelActive(context: ChannelHandlerContext) {
        waitingSince = context.eventLoop.now
        schedule(context, at: waitingSince + endpoint.limits.requestTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        queued.removeAll()
        queuedBytes = 0
        context.fireChannelInactive()
    }

    /// The timer is moved on only when it fires, so a request that arrives in time costs no
    /// timer work, only `waitingSince` set as it is answered.
    private func schedule(_ context: ChannelHandlerContext, at time: NIODeadline) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(deadline: time) { bound.value.handler.expire(bound.value.context) }
    }

    /// Closes the connection when no whole request arrived within `requestTimeout` of the last
    /// answer (idle, stalled, trickled, or a client that stopped reading its answers); waiting
    /// for our own answer does not count.
    private func expire(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let due = waitingSince + endpoint.limits.requestTimeout
        if case .answering = state {
            schedule(context, at: context.eventLoop.now + endpoint.limits.requestTimeout)
        } else if due > context.eventLoop.now {
            schedule(context, at: due)
        } else {
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            closing = true
            if case .idle = state, queued.isEmpty { context.close(promise: nil) }
            return
        }
        if case ChannelEvent.inputClosed = event {
            inputClosed = true
            finishIfDone(context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A parser error on a closed channel is the decoder flushing a partial request after our
        // own close (an overflowing client): nothing to answer or report.
        guard context.channel.isActive else { return }
        guard error is HTTPParserError else {
            endpoint.logger.debug("push connection error", metadata: ["risc.error": "\(Printable.safe("\(error)"))"])
            context.close(promise: nil)
            return
        }
        // Malformed HTTP: the decoder reads nothing more. Requests read before it are answered
        // first (a SET being stored gets its 202), then a 400 that says so, then the close.
        let problem = SETError(.invalidRequest, "malformed HTTP request: \(Printable.safe(String(describing: error), maxBytes: 80))")
        endpoint.malformedRequest(problem, remote: endpoint.clientAddress(peer: context.channel.remoteAddress, headers: [:]))
        if case .discarding = state {
            context.close(promise: nil)
            return
        }
        if case .receiving = state { state = .idle }  // the request it broke is not answered
        if case .refusing = state { state = .idle }
        malformed = problem
        if case .answering = state { return }
        resume(context)
    }

    private func tooLarge(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        state = .discarding(0)
        let remote = endpoint.clientAddress(peer: context.channel.remoteAddress, headers: head.headers)
        var record = endpoint.rejectedRecord(status: .payloadTooLarge, remote: remote)
        record["description"] = .string("body larger than \(endpoint.limits.maxBodyBytes) bytes")
        endpoint.reject(record, outcome: "too_large")
        if let limiter = endpoint.limiter, let remote { limiter.recordInvalid(remote, now: Date().timeIntervalSince1970) }
        // A client waiting for 100 Continue sends no body: close now. Otherwise read the body away
        // first (up to `discardLimit`), so closing does not reset the connection under the answer.
        respond(context, head, .payloadTooLarge, close: true, closeNow: Self.expectsContinue(head))
    }

    private func receive(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ body: ByteBuffer) {
        let remote = endpoint.clientAddress(peer: context.channel.remoteAddress, headers: head.headers)
        if limited(context, head, remote) { return }
        switch endpoint.route(head) {
        case .revocation(let revocation)?: return revoke(context, head, body, remote, revocation)
        case .document(let documents, let document)?:
            state = .idle
            let answer = documents.answer(document)
            respond(context, head, answer.status, headers: answer.headers, body: answer.body)
            return resume(context)
        default: break
        }
        let delivery = Intake.Delivery(
            body: Array(buffer: body), remoteAddress: remote, contentType: head.headers.first(name: "content-type"))
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: eventLoop)
        endpoint.intake.receive(delivery, hop: { eventLoop.execute($0) }) { result in
            if eventLoop.inEventLoop {
                bound.value.handler.answer(bound.value.context, head, remote, result)
            } else {
                eventLoop.execute { bound.value.handler.answer(bound.value.context, head, remote, result) }
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
            remote: remote, retryAfter: endpoint.limits.retryAfter
        ) { answer in
            eventLoop.execute {
                let (handler, context) = bound.value
                if let refusal = answer.refusal {
                    handler.endpoint.reject(refusal, outcome: "rejected")
                    if let limiter = handler.endpoint.limiter, let remote { limiter.recordInvalid(remote, now: Date().timeIntervalSince1970) }
                }
                handler.state = .idle
                handler.respond(context, head, HTTPResponseStatus(statusCode: answer.status), headers: answer.headers, body: answer.body)
                handler.resume(context)
            }
        }
    }

    /// Answers 429 when the invalid-request limiter holds `remote` back.
    private func limited(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ remote: String?) -> Bool {
        if let limiter = endpoint.limiter, let remote, let limited = limiter.check(remote, now: Date().timeIntervalSince1970) {
            if let count = limited.log {
                var record = EventLogRecord(step: .received, outcome: .limited, time: Date().timeIntervalSince1970)
                record["remote"] = .string(remote)
                record["http_status"] = 429
                record["count"] = .number(Double(count))
                endpoint.reject(record, outcome: "limited")
            } else {
                endpoint.intake.metrics?.observe(outcome: "limited", err: nil, verifySeconds: nil, commitSeconds: nil)
            }
            state = .idle
            respond(context, head, .tooManyRequests, headers: [("Retry-After", String(max(1, limited.retryAfter)))])
            return true
        }
        return false
    }

    private func answer(
        _ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ remote: String?, _ result: Result<AppendOutcome, any Error>
    ) {
        state = .idle
        defer { resume(context) }
        switch result {
        case .success:
            if let reason = endpoint.becameAvailable() { endpoint.logger.notice("accepting SETs again", metadata: ["risc.after": "\(reason)"]) }
            respond(context, head, .accepted)
        case .failure(let error as SETError):
            endpoint.logger.debug("SET rejected", metadata: ["risc.err": "\(error.code)"])
            if let limiter = endpoint.limiter, let remote { limiter.recordInvalid(remote, now: Date().timeIntervalSince1970) }
            badRequest(context, head, error)
        case .failure(let error as KeyUnavailableError):
            if endpoint.becameUnavailable("no usable key set") {
                endpoint.logger.warning("no usable key set; answering 503", metadata: ["risc.error": "\(Printable.safe(error.description))"])
            }
            unavailable(context, head, reason: "signing keys are temporarily unavailable")
        case .failure(let error):
            if endpoint.becameUnavailable("store failing") {
                endpoint.logger.error("cannot store the SET; answering 503", metadata: ["risc.error": "\(Printable.safe("\(error)"))"])
            }
            unavailable(context, head, reason: "the receiver cannot store events right now")
        }
    }

    /// The RFC 8935 400: `{"err", "description"}` as JSON, in English.
    private func badRequest(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ error: SETError, close: Bool = false) {
        respond(
            context, head, .badRequest, headers: [("Content-Type", "application/json"), ("Content-Language", "en")],
            body: error.responseBody, close: close)
    }

    /// Our own temporary fault: 503 with `Retry-After`, so the transmitter tries again. The body
    /// has the 400's shape (`err`, `description`).
    private func unavailable(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, reason: String) {
        var body = JSONObject()
        body["err"] = "temporarily_unavailable"
        body["description"] = .string(reason)
        respond(
            context, head, .serviceUnavailable,
            headers: [("Content-Type", "application/json"), ("Retry-After", String(endpoint.limits.retryAfter))],
            body: JSONValue.object(body).serialized)
    }

    /// Writes a whole response. `close` ends the connection after it (always when the client asked).
    private func respond(
        _ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ status: HTTPResponseStatus,
        headers: [(String, String)] = [], body: String? = nil, close: Bool = false, closeNow: Bool = true
    ) {
        waitingSince = context.eventLoop.now
        let keepAlive = head.isKeepAlive && !close && !closing
        var fields = HTTPHeaders(headers)
        fields.add(name: "Content-Length", value: String(body?.utf8.count ?? 0))
        if !keepAlive {
            fields.add(name: "Connection", value: "close")
        } else if head.version.major == 1 && head.version.minor == 0 {
            fields.add(name: "Connection", value: "keep-alive")
        }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: fields))), promise: nil)
        if let body, head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        }
        guard !keepAlive, closeNow else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
