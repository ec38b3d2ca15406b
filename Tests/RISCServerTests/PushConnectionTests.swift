import NIOCore
import NIOHTTP1
import RISCCore
import Testing

@testable import RISCServer

/// The push connection's rules, driven without a channel: parts, answers, timers and events in,
/// actions out.
@Suite("Push connection state machine")
struct PushConnectionTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let limits = PushConnection.Limits(maxBodyBytes: 100, maxQueuedBytes: 400, requestTimeout: .seconds(10))

    var connection = PushConnection(limits: Self.limits, now: Self.start)
    var now = Self.start
    var writable = true
    var active = true
    var channel: PushConnection.Channel { PushConnection.Channel(writable: writable, active: active, now: now) }

    static func head(_ method: HTTPMethod = .POST, _ uri: String = "/events", _ fields: [(String, String)] = [], version: HTTPVersion = .http1_1)
        -> HTTPRequestHead
    {
        HTTPRequestHead(version: version, method: method, uri: uri, headers: HTTPHeaders(fields))
    }

    static func body(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: 0x41, count: count) }

    /// The actions' shapes, for comparing.
    static func names(_ actions: [PushConnection.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .read: "read"
            case .close: "close"
            case .sendContinue: "continue"
            case .dispatch(_, let body): "dispatch(\(body.readableBytes))"
            case .write(let head, _, let closeAfter): "write(\(head.status.code)\(closeAfter ? ",close" : ""))"
            case .refused(_, let route): "refused(\(route.status.code))"
            case .tooLarge: "tooLarge"
            case .overflowed: "overflowed"
            case .schedule: "schedule"
            }
        }
    }

    mutating func send(_ parts: [PushConnection.Part]) -> [String] {
        var actions: [String] = []
        for part in parts { actions += Self.names(connection.received(part, channel)) }
        return actions
    }

    mutating func request(_ head: HTTPRequestHead = Self.head(), route: PushConnection.Route = .served, body: Int = 10) -> [String] {
        send([.head(head, route), .body(Self.body(body)), .end])
    }

    @Test("a whole request is dispatched; its answer is written with its length, and the connection stays open")
    mutating func oneRequest() {
        #expect(request() == ["dispatch(10)"])
        #expect(connection.isAnswering)
        let actions = connection.answered(PushConnection.Answer(status: .accepted), channel)
        guard case .write(let head, let body, let closeAfter)? = actions.first else {
            Issue.record("no write: \(actions)")
            return
        }
        #expect(actions.count == 1 && head.status == .accepted && body == nil && !closeAfter)
        #expect(head.headers["Content-Length"] == ["0"] && head.headers["Connection"].isEmpty)
    }

    @Test("requests pipelined behind one being answered wait, then are handled in order, one at a time")
    mutating func pipelining() {
        #expect(request() == ["dispatch(10)"])
        #expect(request(body: 20) == [])
        #expect(request(body: 30) == [])
        #expect(connection.queuedParts == 6)
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202)", "dispatch(20)"])
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202)", "dispatch(30)"])
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202)"])
        #expect(connection.queuedParts == 0)
    }

    @Test("a client that pipelines more than maxQueuedBytes is reported and closed")
    mutating func overflow() {
        #expect(request() == ["dispatch(10)"])
        var actions: [String] = []
        let parts: [PushConnection.Part] = [.head(Self.head(), .served), .body(Self.body(90)), .end]
        for part in Array(repeating: parts, count: 6).joined() where actions.isEmpty { actions = send([part]) }
        #expect(actions == ["overflowed", "close"])
        #expect(connection.queuedParts == 0)
    }

    @Test("413 for a declared or actual body over maxBodyBytes; the rest is read away, then the connection closes")
    mutating func tooLarge() {
        #expect(send([.head(Self.head(.POST, "/events", [("Content-Length", "101")]), .served)]) == ["tooLarge", "write(413)"])
        #expect(send([.body(Self.body(50)), .end]) == ["close"])

        connection = PushConnection(limits: Self.limits, now: now)
        #expect(send([.head(Self.head(), .served), .body(Self.body(60))]) == [])
        #expect(send([.body(Self.body(60))]) == ["tooLarge", "write(413)"])
        // More than discardLimit read away: closed without waiting for the end.
        var limits = Self.limits
        limits.discardLimit = 100
        connection.limits = limits
        #expect(send([.body(Self.body(101))]) == ["close"])
    }

    @Test("a client waiting for 100 Continue gets it; one declaring too much gets 413 and an immediate close")
    mutating func expectContinue() {
        #expect(send([.head(Self.head(.POST, "/events", [("Expect", "100-continue")]), .served)]) == ["continue"])
        connection = PushConnection(limits: Self.limits, now: now)
        let actions = send([.head(Self.head(.POST, "/events", [("Expect", "100-continue"), ("Content-Length", "500")]), .served)])
        #expect(actions == ["tooLarge", "write(413,close)"])
    }

    @Test("404 and 405 are answered at the request's end with its body dropped; 405 names the methods in Allow")
    mutating func refusals() {
        #expect(request(Self.head(.POST, "/nope"), route: .notFound) == ["refused(404)", "write(404)"])
        let actions =
            connection.received(.head(Self.head(.GET), .methodNotAllowed(allow: "POST")), channel)
            + connection.received(.end, channel)
        #expect(Self.names(actions) == ["refused(405)", "write(405)"])
        if case .write(let head, _, _) = actions.last { #expect(head.headers["Allow"] == ["POST"]) }
        // A refused request whose body passes the limit is answered at once, then read away.
        #expect(send([.head(Self.head(.POST, "/nope"), .notFound), .body(Self.body(101))]) == ["write(404)"])
        #expect(send([.end]) == ["close"])
    }

    @Test("malformed HTTP after pipelined requests: they are answered first, then the 400, then the close")
    mutating func malformedAfterPipelined() {
        #expect(request() == ["dispatch(10)"])
        #expect(request(body: 20) == [])
        #expect(connection.malformed(SETError(.invalidRequest, "malformed"), channel).isEmpty)
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202)", "dispatch(20)"])
        let last = connection.answered(PushConnection.Answer(status: .accepted), channel)
        #expect(Self.names(last) == ["write(202)", "write(400,close)"])
        if case .write(_, let body, _) = last.last { #expect(body?.contains("invalid_request") == true) }
    }

    @Test("malformed HTTP in the middle of a body drops that request and answers 400 at once")
    mutating func malformedMidBody() {
        #expect(send([.head(Self.head(), .served), .body(Self.body(5))]) == [])
        #expect(Self.names(connection.malformed(SETError(.invalidRequest, "malformed"), channel)) == ["write(400,close)"])
    }

    @Test("while the client does not read its answers, reads are held and requests wait; writable again resumes both")
    mutating func backpressure() {
        writable = false
        #expect(Self.names(connection.read(channel)) == [])
        #expect(request() == [])
        #expect(connection.queuedParts == 3)
        writable = true
        #expect(Self.names(connection.writabilityChanged(channel)) == ["dispatch(10)", "read"])
        #expect(Self.names(connection.read(channel)) == ["read"])
    }

    @Test("shutdown closes an idle connection at once, and one answering after its answer, dropping what was pipelined")
    mutating func quiesce() {
        #expect(Self.names(connection.quiesce()) == ["close"])
        connection = PushConnection(limits: Self.limits, now: now)
        #expect(request() == ["dispatch(10)"])
        #expect(request() == [])
        #expect(connection.quiesce().isEmpty)
        let actions = connection.answered(PushConnection.Answer(status: .accepted), channel)
        #expect(Self.names(actions) == ["write(202,close)"])
        if case .write(let head, _, _) = actions.first { #expect(head.headers["Connection"] == ["close"]) }
        #expect(connection.queuedParts == 0)
    }

    @Test("a half-closed client gets its answer, then the close")
    mutating func halfClosed() {
        #expect(request() == ["dispatch(10)"])
        #expect(connection.inputClosed(channel).isEmpty)
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202)", "close"])
    }

    @Test("the request timer: closes a connection with no whole request within the timeout of the last answer, never one awaiting our answer")
    mutating func timer() {
        #expect(Self.names(connection.opened(channel)) == ["schedule"])
        now = Self.start + .seconds(4)
        _ = request()
        now = Self.start + .seconds(10)
        // Answering: the timer moves on a whole timeout.
        guard case .schedule(let next)? = connection.timerFired(channel).first else {
            Issue.record("no schedule")
            return
        }
        #expect(next == now + .seconds(10))
        now = Self.start + .seconds(12)
        _ = connection.answered(PushConnection.Answer(status: .accepted), channel)
        now = Self.start + .seconds(20)
        // Answered at 12: due at 22, not yet.
        guard case .schedule(let due)? = connection.timerFired(channel).first else {
            Issue.record("no schedule")
            return
        }
        #expect(due == Self.start + .seconds(22))
        now = due
        #expect(Self.names(connection.timerFired(channel)) == ["close"])
        active = false
        #expect(connection.timerFired(channel).isEmpty)
    }

    @Test("HTTP/1.0 keep-alive is said; HEAD gets no body; Connection: close is honoured")
    mutating func framing() {
        _ = request(Self.head(.POST, "/events", [("Connection", "keep-alive")], version: .http1_0))
        let old = connection.answered(PushConnection.Answer(status: .accepted), channel)
        if case .write(let head, _, let close) = old.first { #expect(head.headers["Connection"] == ["keep-alive"] && !close) }
        _ = request(Self.head(.HEAD, "/jwks"))
        let headAnswer = connection.answered(PushConnection.Answer(status: .ok, body: "{}"), channel)
        if case .write(let head, let body, _) = headAnswer.first { #expect(body == nil && head.headers["Content-Length"] == ["2"]) }
        _ = request(Self.head(.POST, "/events", [("Connection", "close")]))
        #expect(Self.names(connection.answered(PushConnection.Answer(status: .accepted), channel)) == ["write(202,close)"])
    }
}
