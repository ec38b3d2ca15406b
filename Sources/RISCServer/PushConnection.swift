import NIOCore
import NIOHTTP1
import RISCCore

/// One push connection's rules, without a channel: what each request part, answer, timer and
/// event leads to, as `Action`s for `PushHandler` to carry out. Requests are answered one at a
/// time; parts pipelined behind one still being answered wait in `queued` (bounded) until it is.
///
/// Backpressure: while the connection is not writable (the client does not read its answers),
/// no further request is answered and no more is read from the socket (`read` is held until the
/// channel is writable again); what was already read waits in `queued`, and a client whose queue
/// passes its bound is closed. So a client that pipelines and never reads holds at most the
/// channel's write buffer and one bounded queue, not memory without end.
struct PushConnection {
    /// What the channel is when an event arrives.
    struct Channel {
        var writable = true
        var active = true
        var now: NIODeadline
    }

    /// The limits a connection reads (`PushEndpoint.limits`, reloadable).
    struct Limits {
        var maxBodyBytes: Int
        var maxQueuedBytes: Int
        var requestTimeout: TimeAmount
        /// How much of an oversized body is read and dropped before the connection is simply closed.
        var discardLimit = 1 << 20
        /// Parts a connection may have waiting before it is closed.
        var maxQueuedParts = 1_024
    }

    /// What a request head is, as the endpoint's routes say.
    enum Route: Equatable {
        case served
        case notFound
        /// The path exists, for these methods (the `Allow` field).
        case methodNotAllowed(allow: String)
        /// A head HTTP itself refuses (RFC 9112 §3.2: an HTTP/1.1 request without exactly one
        /// valid Host field): 400 `invalid_request` saying why, then the connection ends.
        case badRequest(String)

        /// The status a refused head is answered with.
        var status: HTTPResponseStatus {
            switch self {
            case .served: .ok
            case .notFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .badRequest: .badRequest
            }
        }
    }

    /// A request part as read, its head already routed.
    enum Part {
        case head(HTTPRequestHead, Route)
        case body(ByteBuffer)
        case end
    }

    /// A whole answer to one request.
    struct Answer {
        var status: HTTPResponseStatus
        var headers: [(String, String)] = []
        var body: String?
        /// End the connection after it (it always ends when the client asked, or on shutdown).
        var close = false
        /// With `close`: close once written, or leave the rest of the request to be read away first.
        var closeNow = true
    }

    /// What the handler does, in order.
    enum Action {
        case read
        case close
        /// Sends `100 Continue`.
        case sendContinue(HTTPVersion)
        /// Verifies and stores (or routes) a whole request; its answer comes back by `answered`.
        case dispatch(HTTPRequestHead, ByteBuffer)
        /// Writes a response; `closeAfter`: close the connection once it is written.
        case write(HTTPResponseHead, body: String?, closeAfter: Bool)
        /// A 404, 405 or a head's 400 to count and report before its answer is written.
        case refused(HTTPRequestHead, Route)
        /// A body over `maxBodyBytes` to report before its 413 is written.
        case tooLarge(HTTPRequestHead)
        /// The client has more waiting than a transmitter would: report, then close.
        case overflowed
        /// Moves the request timer to fire at this time.
        case schedule(NIODeadline)
    }

    private enum Phase {
        case idle
        /// Reading the body of a request that is served.
        case receiving(HTTPRequestHead, ByteBuffer)
        /// A request answered by its head alone (404, 405, a head's 400), once its end arrives; its
        /// body is dropped, and one longer than `maxBodyBytes` is answered at once and the
        /// connection closed.
        case refusing(HTTPRequestHead, Route, dropped: Int)
        /// Answered 413; the rest of the body is read and dropped (up to a limit), then the
        /// connection closes.
        case discarding(Int)
        /// Waiting for the request's answer (verification, then the store's commit).
        case answering(HTTPRequestHead)
    }

    var limits: Limits
    private var phase = Phase.idle
    /// Parts that arrived while a request was being answered (or the client was not reading its
    /// answers), with their bytes counted.
    private var queued = CircularBuffer<Part>()
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
    private var waitingSince: NIODeadline
    private let allocator = ByteBufferAllocator()

    /// For answers that belong to no request head (malformed HTTP).
    static let fallbackHead = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/")

    init(limits: Limits, now: NIODeadline) {
        self.limits = limits
        self.waitingSince = now
    }

    /// Whether a request is being answered (for tests and the timer).
    var isAnswering: Bool {
        if case .answering = phase { return true }
        return false
    }

    /// Parts waiting behind the request in hand.
    var queuedParts: Int { queued.count }

    // MARK: Events

    /// The connection opened: the first request is due within `requestTimeout`.
    mutating func opened(_ channel: Channel) -> [Action] {
        waitingSince = channel.now
        return [.schedule(channel.now + limits.requestTimeout)]
    }

    /// The pipeline asks for more bytes.
    mutating func read(_ channel: Channel) -> [Action] {
        if channel.writable { return [.read] }
        readHeld = true
        return []
    }

    mutating func writabilityChanged(_ channel: Channel) -> [Action] {
        guard channel.writable else { return [] }
        var actions = resume(channel)
        if readHeld, channel.active {
            readHeld = false
            actions.append(.read)
        }
        return actions
    }

    mutating func received(_ part: Part, _ channel: Channel) -> [Action] {
        if case .answering = phase { return enqueue(part) }
        if !queued.isEmpty || (!channel.writable && producesAnswer(part)) { return enqueue(part) }
        var actions: [Action] = []
        handle(part, channel, into: &actions)
        return actions
    }

    /// The request in hand has its answer: write it, then go on with what waits.
    mutating func answered(_ answer: Answer, _ channel: Channel) -> [Action] {
        guard case .answering(let head) = phase else { return [] }
        phase = .idle
        var actions = [respond(head, answer, channel)]
        actions += resume(channel)
        return actions
    }

    /// Shutdown: end after the request in hand (now, when there is none).
    mutating func quiesce() -> [Action] {
        closing = true
        if case .idle = phase, queued.isEmpty { return [.close] }
        return []
    }

    /// The client closed its sending side.
    mutating func inputClosed(_ channel: Channel) -> [Action] {
        inputClosed = true
        var actions: [Action] = []
        finishIfDone(channel, into: &actions)
        return actions
    }

    /// Malformed HTTP: the decoder reads nothing more. Requests read before it are answered
    /// first (a SET being stored gets its 202), then a 400 that says so, then the close.
    mutating func malformed(_ problem: SETError, _ channel: Channel) -> [Action] {
        switch phase {
        case .discarding: return [.close]
        case .receiving, .refusing: phase = .idle  // the request it broke is not answered
        case .idle, .answering: break
        }
        malformed = problem
        if case .answering = phase { return [] }
        return resume(channel)
    }

    /// The request timer fired: closes the connection when no whole request arrived within
    /// `requestTimeout` of the last answer (idle, stalled, trickled, or a client that stopped
    /// reading its answers); waiting for our own answer does not count. The timer is moved on
    /// only when it fires, so a request that arrives in time costs no timer work.
    mutating func timerFired(_ channel: Channel) -> [Action] {
        guard channel.active else { return [] }
        let due = waitingSince + limits.requestTimeout
        if case .answering = phase { return [.schedule(channel.now + limits.requestTimeout)] }
        if due > channel.now { return [.schedule(due)] }
        return [.close]
    }

    /// The connection closed: drop what waits.
    mutating func closed() {
        queued.removeAll()
        queuedBytes = 0
    }

    // MARK: Rules

    /// Whether handling `part` now may write an answer (body parts of a request being read do
    /// not, so they need not wait for the client to read).
    private func producesAnswer(_ part: Part) -> Bool {
        if case .body = part, case .receiving = phase { return false }
        return true
    }

    /// Holds a part back; a client that has more than a few requests' worth waiting is not a
    /// transmitter, and is closed.
    private mutating func enqueue(_ part: Part) -> [Action] {
        queuedBytes += Self.size(of: part)
        queued.append(part)
        guard queuedBytes > limits.maxQueuedBytes || queued.count > limits.maxQueuedParts else { return [] }
        closed()
        return [.overflowed, .close]
    }

    /// What a part holds in memory, roughly: its body bytes, or its head's URI and fields.
    private static func size(of part: Part) -> Int {
        switch part {
        case .head(let head, _): 64 + head.uri.utf8.count + head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        case .body(let buffer): buffer.readableBytes
        case .end: 16
        }
    }

    /// Handles parts held back while a request was answered, until one needs answering again
    /// or the client stops reading; then whatever was left for the end (a malformed request's
    /// 400, a half-closed client's close).
    private mutating func resume(_ channel: Channel) -> [Action] {
        if closing {  // shutting down: a pipelined request not yet answered is left to its retry
            closed()
            return []
        }
        var actions: [Action] = []
        while let part = queued.first {
            if case .answering = phase { return actions }
            if !channel.writable, producesAnswer(part) { return actions }
            queued.removeFirst()
            queuedBytes -= Self.size(of: part)
            handle(part, channel, into: &actions)
        }
        finishIfDone(channel, into: &actions)
        return actions
    }

    /// Everything read has been answered: answer a malformed request, or close a half-closed
    /// connection.
    private mutating func finishIfDone(_ channel: Channel, into actions: inout [Action]) {
        guard queued.isEmpty, channel.active else { return }
        switch phase {
        case .idle, .refusing, .receiving: break
        case .answering, .discarding: return
        }
        if let error = malformed {
            malformed = nil
            phase = .idle
            let answer = Answer(
                status: .badRequest, headers: [("Content-Type", "application/json"), ("Content-Language", "en")], body: error.responseBody, close: true)
            actions.append(respond(Self.fallbackHead, answer, channel))
        } else if inputClosed, case .idle = phase {
            actions.append(.close)
        }
    }

    private mutating func handle(_ part: Part, _ channel: Channel, into actions: inout [Action]) {
        switch part {
        case .head(let head, let route):
            let declared = head.headers.first(name: "content-length").flatMap { Int($0) }
            switch route {
            case .notFound, .methodNotAllowed, .badRequest: phase = .refusing(head, route, dropped: 0)
            case .served:
                if let declared, declared > limits.maxBodyBytes { return tooLarge(head, channel, into: &actions) }
                if Self.expectsContinue(head) { actions.append(.sendContinue(head.version)) }
                phase = .receiving(head, allocator.buffer(capacity: min(declared ?? 2048, limits.maxBodyBytes)))
            }
        case .body(var part):
            switch phase {
            case .receiving(let head, var body):
                if body.readableBytes + part.readableBytes > limits.maxBodyBytes { return tooLarge(head, channel, into: &actions) }
                phase = .idle  // drop the phase's reference so the append does not copy
                body.writeBuffer(&part)
                phase = .receiving(head, body)
            case .refusing(let head, let route, let dropped):
                let total = dropped + part.readableBytes
                guard total > limits.maxBodyBytes else {
                    phase = .refusing(head, route, dropped: total)
                    return
                }
                phase = .discarding(total)
                actions.append(respond(head, Self.refusal(route, close: true), channel))
            case .discarding(let dropped):
                let total = dropped + part.readableBytes
                if total > limits.discardLimit { actions.append(.close) }
                phase = .discarding(total)
            case .idle, .answering:
                break
            }
        case .end:
            switch phase {
            case .receiving(let head, let body):
                phase = .answering(head)
                actions.append(.dispatch(head, body))
            case .refusing(let head, let route, _):
                phase = .idle
                actions.append(.refused(head, route))
                actions.append(respond(head, Self.refusal(route), channel))
            case .discarding:
                actions.append(.close)
            case .idle, .answering:
                break
            }
        }
    }

    /// A 404 or 405, or a head's 400 (which ends the connection); `close`: its body was too long
    /// to read away, so the connection ends once the answer is read (not at once, which could
    /// reset it under the answer).
    private static func refusal(_ route: Route, close: Bool = false) -> Answer {
        switch route {
        case .badRequest(let description):
            return Answer(
                status: .badRequest, headers: [("Content-Type", "application/json"), ("Content-Language", "en")],
                body: SETError(.invalidRequest, description).responseBody, close: true, closeNow: !close)
        case .methodNotAllowed(let allow): return Answer(status: .methodNotAllowed, headers: [("Allow", allow)], close: close, closeNow: !close)
        case .served, .notFound: return Answer(status: route.status, close: close, closeNow: !close)
        }
    }

    /// Answers 413. A client waiting for 100 Continue sends no body: close now. Otherwise read
    /// the body away first (up to `discardLimit`), so closing does not reset the connection under
    /// the answer.
    private mutating func tooLarge(_ head: HTTPRequestHead, _ channel: Channel, into actions: inout [Action]) {
        phase = .discarding(0)
        actions.append(.tooLarge(head))
        actions.append(respond(head, Answer(status: .payloadTooLarge, close: true, closeNow: Self.expectsContinue(head)), channel))
    }

    /// A request that asks to change protocols (`Connection: upgrade` with an `Upgrade` field, or
    /// CONNECT): NIO's decoder reads nothing after it on the connection, expecting the upgrade risc
    /// never makes, so its answer ends the connection rather than leave what the client sends next
    /// unanswered until the request timeout.
    static func asksToUpgrade(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        guard head.headers.contains(name: "upgrade") else { return false }
        return head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
    }

    /// The client waits for `100 Continue` before it sends the body.
    static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        head.headers.first(name: "expect")?.lowercased() == "100-continue"
    }

    /// The response to `head`: its framing fields, and whether the connection ends after it.
    private mutating func respond(_ head: HTTPRequestHead, _ answer: Answer, _ channel: Channel) -> Action {
        waitingSince = channel.now
        let keepAlive = head.isKeepAlive && !answer.close && !closing && !Self.asksToUpgrade(head)
        var fields = HTTPHeaders(answer.headers)
        fields.add(name: "Content-Length", value: String(answer.body?.utf8.count ?? 0))
        if !keepAlive {
            fields.add(name: "Connection", value: "close")
        } else if head.version.major == 1 && head.version.minor == 0 {
            fields.add(name: "Connection", value: "keep-alive")
        }
        return .write(
            HTTPResponseHead(version: head.version, status: answer.status, headers: fields), body: head.method == .HEAD ? nil : answer.body,
            closeAfter: !keepAlive && answer.closeNow)
    }
}
