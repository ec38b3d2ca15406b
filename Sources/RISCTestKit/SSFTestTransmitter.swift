import Dispatch
import Foundation
import RISCClient
public import RISCCore
import Synchronization

/// An SSF 1.0 transmitter on loopback, for tests and `risc dev-issuer --ssf`: metadata at
/// `/.well-known/ssf-configuration`, its JWKS, an OAuth 2.0 token endpoint (client credentials:
/// `client_secret_basic`, `client_secret_post`, `private_key_jwt`), stream management (SSF §8:
/// create, read, update, replace, delete, status, subjects, verification), push delivery (RFC
/// 8935) to the stream's endpoint with its `authorization_header`, and poll delivery (RFC 8936).
/// What it served and was sent is kept for tests to read; its misbehaviours (another `iss` in
/// stream answers, tokens expired early) are switched on by tests.
public final class SSFTestTransmitter: Sendable {
    /// An OAuth client allowed to manage streams: a secret, or a public key for `private_key_jwt`.
    public struct Client: Sendable {
        public let id: String
        public let secret: String?
        public let publicKey: PublicKey?
        public init(id: String, secret: String? = nil, publicKey: PublicKey? = nil) {
            self.id = id
            self.secret = secret
            self.publicKey = publicKey
        }
    }

    public struct State: Sendable {
        /// Streams by id: their configuration as the transmitter keeps it.
        public var streams: [String: JSONObject] = [:]
        public var statuses: [String: String] = [:]
        public var subjects: [String: [JSONValue]] = [:]
        /// SETs waiting for a poll, per stream, in order: (jti, compact SET).
        public var pending: [String: [(jti: String, set: String)]] = [:]
        /// What polls acknowledged and refused.
        public var acknowledged: [String] = []
        public var setErrors: [String: JSONObject] = [:]
        /// Valid access tokens and when each expires (on `clock`).
        public var tokens: [String: Double] = [:]
        /// Every request, `METHOD path` (query left out).
        public var requests: [String] = []
        /// How clients authenticated at the token endpoint, in order.
        public var clientAuthentications: [String] = []
        /// Requests that presented an access token that had expired or was never issued.
        public var staleTokens: [String] = []
        /// HTTP statuses the receiver answered pushes with, in order.
        public var pushes: [Int] = []
        /// Stream answers name this `iss` instead of the transmitter's (the conformance suite's
        /// `stream-issuer-mismatch`).
        public var answerIssuer: String?
        /// Seconds an access token lives.
        public var tokenLifetime: Double = 3_600
        /// Answer the next polls 429 with `Retry-After` this many times.
        public var throttlePolls = 0
        /// Members every poll answer's `sets` also carries, as they are (a transmitter's mistakes),
        /// until acknowledged or refused.
        public var oddPollMembers = JSONObject()
        /// Every poll answer says `moreAvailable: true`, whatever waits (a transmitter's mistake).
        public var alwaysMoreAvailable = false
        /// Polls' acknowledgements and errors are recorded but the SETs stay waiting (a transmitter's mistake).
        public var ignoresAcknowledgements = false
    }

    public let server: LoopbackHTTPServer
    /// Signs its SETs (a P-256 key of its own, `kid` `ssf-test-1`).
    public let factory: SETFactory
    /// Its JWK Set, as served.
    public let jwks: String
    /// The `aud` its SETs carry.
    public let audience: String
    private let clients: [Client]
    private let state: Mutex<State>
    private let clock: @Sendable () -> Double

    public init(
        audience: String, clients: [Client], port: Int = 0, issuer: String? = nil, clock: @escaping @Sendable () -> Double = systemNow
    ) throws {
        let key = try PrivateKey.generate(.ec(curve: "P-256"))
        let jwks = JSONValue.object(["keys": .array([.object(key.publicKey.jwk(keyID: "ssf-test-1", algorithm: .es256))])]).serialized
        let state = Mutex(State())
        self.state = state
        self.jwks = jwks
        self.audience = audience
        self.clients = clients
        self.clock = clock
        // The server's handler needs `self`; it is set once the server runs.
        let box = Mutex<SSFTestTransmitter?>(nil)
        server = try LoopbackHTTPServer(port: port) { request in
            guard let transmitter = box.withLock({ $0 }) else { return .json(#"{"error":"starting"}"#, status: 503) }
            return transmitter.handle(request)
        }
        factory = SETFactory(
            issuer: issuer ?? server.baseURL, audience: audience, signer: JWSSigner(key: key, algorithm: .es256, keyID: "ssf-test-1"))
        box.withLock { $0 = self }
    }

    public var issuer: String { factory.issuer }
    public var metadataURL: String { server.baseURL + "/.well-known/ssf-configuration" }
    public var tokenURL: String { server.baseURL + "/token" }

    /// Reads or changes what it keeps.
    public func withState<T>(_ body: (inout State) -> T) -> T { state.withLock { body(&$0) } }

    /// Every access token issued so far stops being accepted (as if its lifetime had passed).
    public func expireTokens() { state.withLock { $0.tokens = $0.tokens.mapValues { _ in -1 } } }

    public func stop() { server.stop() }

    // MARK: Events

    /// Signs one event about `subject` for `stream` and delivers it as the stream says: pushed
    /// now (in the background) or kept for the next poll. Returns its `jti`.
    @discardableResult
    public func emit(_ type: EventType, subject: JSONValue?, extra: JSONObject = JSONObject(), stream: String, jti: String? = nil) throws -> String {
        let jti = jti ?? UUID().uuidString.lowercased()
        var claims = factory.claims(type: type, subject: nil, extra: extra, jti: jti)
        if let subject { claims["sub_id"] = subject }
        claims["aud"] = .string(audience)
        let set = try factory.sign(claims, header: ["typ": "secevent+jwt"])
        deliver(jti: jti, set: set, stream: stream)
        return jti
    }

    /// Delivers a signed SET on `stream`: pushed in the background, or queued for polls.
    public func deliver(jti: String, set: String, stream: String) {
        let delivery = state.withLock { $0.streams[stream]?["delivery"]?.objectValue }
        guard delivery?["method"]?.stringValue == SSFDelivery.push, let url = delivery?["endpoint_url"]?.stringValue else {
            state.withLock { $0.pending[stream, default: []].append((jti, set)) }
            return
        }
        var headers: [(name: String, value: String)] = [("Content-Type", "application/secevent+jwt"), ("Accept", "application/json")]
        if let authorization = delivery?["authorization_header"]?.stringValue { headers.append(("Authorization", authorization)) }
        let request = HTTPRequest(method: "POST", url: url, headers: headers, body: Array(set.utf8))
        DispatchQueue.global().async { [self] in
            let status = (try? CurlHTTPClient.patient().performBlocking(request))?.status ?? 0
            state.withLock { $0.pushes.append(status) }
        }
    }

    // MARK: Requests

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        let path = String(request.path.prefix { $0 != "?" })
        let query = Self.form(String(request.path.drop { $0 != "?" }.dropFirst()))
        state.withLock { $0.requests.append("\(request.method) \(path)") }
        switch (request.method, path) {
        case ("GET", "/.well-known/ssf-configuration"): return .json(metadata.serialized)
        case ("GET", "/jwks"): return .json(jwks)
        case ("POST", "/token"): return token(request)
        case ("POST", "/dev/emit"): return devEmit(query["stream_id"], request.body)
        default: break
        }
        if let refusal = authorize(request) { return refusal }
        let body = try? JSONParser.parseObject(request.body)
        switch (request.method, path) {
        case ("POST", "/ssf/stream"): return create(body)
        case ("GET", "/ssf/stream"):
            guard let id = query["stream_id"] else { return .json(JSONValue.array(state.withLock { $0.streams.values.map { .object(answer($0)) } }).serialized) }
            return stream(id).map { .json(JSONValue.object(answer($0)).serialized) } ?? Self.error(404, "no such stream")
        case ("PATCH", "/ssf/stream"), ("PUT", "/ssf/stream"): return change(body, replace: request.method == "PUT")
        case ("DELETE", "/ssf/stream"):
            guard let id = query["stream_id"], state.withLock({ $0.streams.removeValue(forKey: id) }) != nil else { return Self.error(404, "no such stream") }
            return .init(status: 204)
        case ("GET", "/ssf/status"):
            guard let id = query["stream_id"], let status = state.withLock({ $0.statuses[id] }) else { return Self.error(404, "no such stream") }
            return .json(JSONValue.object(["stream_id": .string(id), "status": .string(status)]).serialized)
        case ("POST", "/ssf/status"):
            guard let id = body?["stream_id"]?.stringValue, let status = body?["status"]?.stringValue, stream(id) != nil else {
                return Self.error(404, "no such stream")
            }
            guard ["enabled", "paused", "disabled"].contains(status) else { return Self.error(400, "unknown status") }
            state.withLock { $0.statuses[id] = status }
            return .json(JSONValue.object(["stream_id": .string(id), "status": .string(status)]).serialized)
        case ("POST", "/ssf/subjects:add"), ("POST", "/ssf/subjects:remove"):
            guard let id = body?["stream_id"]?.stringValue, stream(id) != nil, let subject = body?["subject"] else { return Self.error(400, "stream_id and subject required") }
            state.withLock { state in
                if path.hasSuffix("add") { state.subjects[id, default: []].append(subject) } else { state.subjects[id]?.removeAll { $0 == subject } }
            }
            return .init(status: 200)
        case ("POST", "/ssf/verify"):
            guard let id = body?["stream_id"]?.stringValue, stream(id) != nil else { return Self.error(404, "no such stream") }
            let extra: JSONObject = body?["state"].map { ["state": $0] } ?? JSONObject()
            _ = try? emit(.ssfVerification, subject: ["format": "opaque", "id": .string(id)], extra: extra, stream: id)
            return .init(status: 204)
        case ("POST", "/ssf/poll"): return poll(query["stream_id"], body)
        default: return Self.error(404, "not found")
        }
    }

    var metadata: JSONValue {
        let base = server.baseURL
        return [
            "spec_version": "1_0", "issuer": .string(issuer), "jwks_uri": .string(base + "/jwks"),
            "delivery_methods_supported": [.string(SSFDelivery.push), .string(SSFDelivery.poll)],
            "configuration_endpoint": .string(base + "/ssf/stream"), "status_endpoint": .string(base + "/ssf/status"),
            "add_subject_endpoint": .string(base + "/ssf/subjects:add"), "remove_subject_endpoint": .string(base + "/ssf/subjects:remove"),
            "verification_endpoint": .string(base + "/ssf/verify"), "authorization_schemes": [["spec_urn": "urn:ietf:rfc:6749"]],
            "default_subjects": "NONE",
        ]
    }

    private func stream(_ id: String) -> JSONObject? { state.withLock { $0.streams[id] } }

    /// A stream as answered: with the transmitter's `iss` (or the one a test asked for).
    private func answer(_ stream: JSONObject) -> JSONObject {
        var answered = stream
        answered["iss"] = .string(state.withLock { $0.answerIssuer } ?? issuer)
        return answered
    }

    private func create(_ body: JSONObject?) -> LoopbackHTTPServer.Response {
        guard let body, let delivery = body["delivery"]?.objectValue, let method = delivery["method"]?.stringValue,
            [SSFDelivery.push, SSFDelivery.poll].contains(method)
        else { return Self.error(400, "delivery.method must be push or poll") }
        if method == SSFDelivery.push, delivery["endpoint_url"]?.stringValue == nil { return Self.error(400, "push needs delivery.endpoint_url") }
        let id = "stream-" + UUID().uuidString.prefix(8).lowercased()
        var stream = JSONObject()
        stream["stream_id"] = .string(id)
        stream["aud"] = .string(audience)
        stream["events_supported"] = .array(EventType.ssfSupported.map { .string($0.uri) })
        let requested = body["events_requested"]?.arrayValue ?? []
        stream["events_requested"] = .array(requested)
        stream["events_delivered"] = .array(requested.filter { value in EventType.ssfSupported.contains { $0.uri == value.stringValue } })
        var kept = delivery
        if method == SSFDelivery.poll { kept["endpoint_url"] = .string(server.baseURL + "/ssf/poll?stream_id=" + id) }
        stream["delivery"] = .object(kept)
        if let description = body["description"] { stream["description"] = description }
        state.withLock {
            $0.streams[id] = stream
            $0.statuses[id] = "enabled"
        }
        return .json(JSONValue.object(answer(stream)).serialized, status: 201)
    }

    private func change(_ body: JSONObject?, replace: Bool) -> LoopbackHTTPServer.Response {
        guard let body, let id = body["stream_id"]?.stringValue, var stream = stream(id) else { return Self.error(404, "no such stream") }
        // Transmitter-supplied members stay; a replace drops the receiver-supplied ones not sent again.
        if replace { for member in ["events_requested", "description"] { stream[member] = nil } }
        for (name, value) in body where !["stream_id", "iss", "aud", "events_supported", "events_delivered"].contains(name) { stream[name] = value }
        let requested = stream["events_requested"]?.arrayValue ?? []
        stream["events_delivered"] = .array(requested.filter { value in EventType.ssfSupported.contains { $0.uri == value.stringValue } })
        state.withLock { $0.streams[id] = stream }
        return .json(JSONValue.object(answer(stream)).serialized)
    }

    private func poll(_ id: String?, _ body: JSONObject?) -> LoopbackHTTPServer.Response {
        guard let id, stream(id) != nil else { return Self.error(404, "no such stream") }
        if state.withLock({ state -> Bool in
            guard state.throttlePolls > 0 else { return false }
            state.throttlePolls -= 1
            return true
        }) {
            return .init(status: 429, headers: [("Retry-After", "1")])
        }
        let acks = (body?["ack"]?.arrayValue ?? []).compactMap(\.stringValue)
        let errors = body?["setErrs"]?.objectValue ?? JSONObject()
        let maxEvents = body?["maxEvents"]?.numberValue.map { Int($0) }
        return state.withLock { state in
            state.acknowledged += acks
            for (jti, error) in errors { state.setErrors[jti] = error.objectValue }
            let done = Set(acks).union(errors.map(\.0))
            if !state.ignoresAcknowledgements { state.pending[id]?.removeAll { done.contains($0.jti) } }
            for jti in done { state.oddPollMembers[jti] = nil }
            let waiting = state.pending[id] ?? []
            let limit = maxEvents ?? waiting.count
            var sets = JSONObject()
            for item in waiting.prefix(limit) { sets[item.jti] = .string(item.set) }
            for (jti, value) in state.oddPollMembers { sets[jti] = value }
            return .json(JSONValue.object(["sets": .object(sets), "moreAvailable": .bool(state.alwaysMoreAvailable || waiting.count > limit)]).serialized)
        }
    }

    /// `POST /dev/emit?stream_id=ID` with `{"type": "session-revoked", "subject": {…}, …event members}`:
    /// signs and delivers one event, so a person can drive the flow by hand (loopback only, no token).
    private func devEmit(_ id: String?, _ body: [UInt8]) -> LoopbackHTTPServer.Response {
        guard let id, stream(id) != nil else { return Self.error(404, "no such stream: give ?stream_id=") }
        guard var object = try? JSONParser.parseObject(body), let name = object["type"]?.stringValue, let type = EventType(name: name) else {
            return Self.error(400, "a JSON object with a known event type in 'type'")
        }
        let subject = object["subject"]
        object["type"] = nil
        object["subject"] = nil
        guard let jti = try? emit(type, subject: subject, extra: object, stream: id) else { return Self.error(500, "cannot sign") }
        return .json(JSONValue.object(["jti": .string(jti)]).serialized, status: 202)
    }

    // MARK: OAuth

    /// Management calls need a live access token: else 401 `invalid_token` (RFC 6750 §3.1).
    private func authorize(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response? {
        let presented = request.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let now = clock()
        let valid = state.withLock { state -> Bool in
            guard let presented else { return false }
            if let expiry = state.tokens[presented], expiry > now { return true }
            state.staleTokens.append(presented)
            return false
        }
        guard !valid else { return nil }
        return .init(
            status: 401, headers: [("WWW-Authenticate", presented == nil ? "Bearer" : #"Bearer error="invalid_token""#), ("Content-Type", "application/json")],
            body: Array(#"{"error":"invalid_token"}"#.utf8))
    }

    private func token(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        let form = Self.form(String(decoding: request.body, as: UTF8.self))
        guard form["grant_type"] == "client_credentials" else { return .json(#"{"error":"unsupported_grant_type"}"#, status: 400) }
        var client: Client?
        var method = ""
        if let basic = request.header("authorization"), basic.hasPrefix("Basic "),
            let decoded = Data(base64Encoded: String(basic.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }), let colon = decoded.firstIndex(of: ":")
        {
            let id = Self.unescape(String(decoded[..<colon])), secret = Self.unescape(String(decoded[decoded.index(after: colon)...]))
            client = clients.first { $0.id == id && $0.secret == secret }
            method = "client_secret_basic"
        } else if let id = form["client_id"], let secret = form["client_secret"] {
            client = clients.first { $0.id == id && $0.secret == secret }
            method = "client_secret_post"
        } else if form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", let assertion = form["client_assertion"] {
            client = verifiedAssertion(assertion)
            method = "private_key_jwt"
        }
        guard let client else { return .json(#"{"error":"invalid_client"}"#, status: 401) }
        let token = "at-" + UUID().uuidString.lowercased()
        let lifetime = state.withLock { state in
            state.tokens[token] = clock() + state.tokenLifetime
            state.clientAuthentications.append("\(client.id) \(method)")
            return state.tokenLifetime
        }
        return .json(
            JSONValue.object(["access_token": .string(token), "token_type": "Bearer", "expires_in": .number(lifetime), "scope": "ssf.read ssf.manage"])
                .serialized)
    }

    /// A `private_key_jwt` client assertion (RFC 7523): signed by a registered client's key,
    /// `iss` = `sub` = its id, `aud` the token endpoint, not expired.
    private func verifiedAssertion(_ assertion: String) -> Client? {
        guard let jws = try? CompactJWS(assertion), let claims = try? JSONParser.parseObject(jws.payload), let id = claims["iss"]?.stringValue,
            claims["sub"]?.stringValue == id, let client = clients.first(where: { $0.id == id }), let key = client.publicKey,
            key.verify(signature: jws.signature, message: jws.signingInput, algorithm: jws.header.algorithm),
            (claims["aud"]?.stringValue ?? claims["aud"]?.arrayValue?.first?.stringValue) == tokenURL, (claims["exp"]?.numberValue ?? 0) > clock()
        else { return nil }
        return client
    }

    static func error(_ status: Int, _ description: String) -> LoopbackHTTPServer.Response {
        .json(JSONValue.object(["error": .string(description)]).serialized, status: status)
    }

    /// `a=b&c=d` (form or query), percent-decoded, `+` as a space.
    static func form(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { unescape(String($0)) }
            if parts.count == 2 { result[parts[0]] = parts[1] }
        }
        return result
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? text
    }
}
