import Foundation
public import RISCCore
import Synchronization

/// How risc authenticates to an SSF transmitter's management API: a static bearer token, or
/// OAuth 2.0 client credentials (RFC 6749 §4.4) with `client_secret_basic`, `client_secret_post`
/// or `private_key_jwt` (RFC 7523).
public enum SSFAuthorization: Sendable {
    case bearer(String)
    case clientCredentials(SSFClientCredentials)
}

public struct SSFClientCredentials: Sendable {
    public enum Method: String, Sendable, CaseIterable {
        case clientSecretBasic = "client_secret_basic"
        case clientSecretPost = "client_secret_post"
        case privateKeyJWT = "private_key_jwt"
    }

    public let tokenURL: String
    public let clientID: String
    public let method: Method
    /// The secret (`client_secret_*`).
    public let secret: String?
    /// The key that signs client assertions (`private_key_jwt`).
    public let signer: JWSSigner?
    /// The scope asked for (`ssf.read ssf.manage` by default, as the conformance suite's transmitter wants).
    public let scope: String?

    public init(tokenURL: String, clientID: String, method: Method, secret: String? = nil, signer: JWSSigner? = nil, scope: String? = "ssf.read ssf.manage") {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.method = method
        self.secret = secret
        self.signer = signer
        self.scope = scope
    }
}

/// A failed call to an SSF transmitter.
public struct SSFError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status; nil: no answer, or an answer risc refuses.
    public let status: Int?
    public let description: String
    /// The answer named another issuer than the transmitter's: the stream must not be used again.
    public let issuerMismatch: Bool
    /// Seconds the transmitter asked to wait (`Retry-After` on 429 or 503).
    public let retryAfter: Double?

    init(status: Int?, _ description: String, issuerMismatch: Bool = false, retryAfter: Double? = nil) {
        self.status = status
        self.description = description
        self.issuerMismatch = issuerMismatch
        self.retryAfter = retryAfter
    }
}

/// SSF 1.0 §8 stream management as a receiver uses it: the transmitter's metadata (its
/// `issuer` must be the configured one), stream create, read, update (PATCH), replace (PUT),
/// delete, status read and update, subjects added and removed, verification requests.
///
/// Access tokens are fetched with client credentials, cached until shortly before they expire
/// (on the injected clock; an expired token is never presented again) and fetched once more when
/// a call is answered 401 (`invalid_token`, RFC 6750). An answer naming another `iss` than the
/// transmitter's throws `SSFError` with `issuerMismatch`: the caller stops using that stream.
public final class SSFStreamClient: Sendable {
    public let issuer: String
    public let metadataURL: String
    let authorization: SSFAuthorization
    let http: CurlHTTPClient
    let clock: @Sendable () -> Double
    private let cached = Mutex<(metadata: JSONObject?, token: String?, expiresAt: Double)>((nil, nil, 0))
    /// Seconds before its expiry a token is no longer used.
    static let tokenMargin: Double = 10

    public init(
        issuer: String, metadataURL: String, authorization: SSFAuthorization, http: CurlHTTPClient = CurlHTTPClient(),
        clock: @escaping @Sendable () -> Double = systemNow
    ) {
        self.issuer = issuer
        self.metadataURL = metadataURL
        self.authorization = authorization
        self.http = http
        self.clock = clock
    }

    // MARK: The calls

    /// The transmitter's metadata (SSF §7.1), fetched once; its `issuer` must be the configured one.
    public func metadata() async throws -> JSONObject {
        if let metadata = cached.withLock({ $0.metadata }) { return metadata }
        let response = try await send(HTTPRequest(url: metadataURL, headers: [("Accept", "application/json")], timeout: 10))
        guard response.status == 200, let metadata = try? JSONParser.parseObject(response.body) else {
            throw SSFError(status: response.status, "the transmitter's metadata at \(metadataURL) is not a JSON object (HTTP \(response.status))")
        }
        guard let named = metadata["issuer"]?.stringValue, SETPolicy.issuerMatches(named, issuer) else {
            throw SSFError(status: nil, "the transmitter's metadata names another issuer than \(issuer)", issuerMismatch: true)
        }
        cached.withLock { $0.metadata = metadata }
        return metadata
    }

    /// `POST configuration_endpoint`: a new stream (201), as the transmitter configured it.
    public func create(_ configuration: JSONObject) async throws -> JSONObject {
        try checked(try await call("POST", endpoint("configuration_endpoint"), body: configuration, expect: [200, 201]))
    }

    /// `GET configuration_endpoint?stream_id=`.
    public func read(streamID: String) async throws -> JSONObject {
        try checked(try await call("GET", try await endpoint("configuration_endpoint", streamID: streamID), expect: [200]))
    }

    /// `PATCH configuration_endpoint`: the members given change, the others stay.
    public func update(streamID: String, _ changes: JSONObject) async throws -> JSONObject {
        var body = changes
        body["stream_id"] = .string(streamID)
        return try checked(try await call("PATCH", endpoint("configuration_endpoint"), body: body, expect: [200]))
    }

    /// `PUT configuration_endpoint`: the receiver-supplied members replaced by these.
    public func replace(streamID: String, _ configuration: JSONObject) async throws -> JSONObject {
        var body = configuration
        body["stream_id"] = .string(streamID)
        return try checked(try await call("PUT", endpoint("configuration_endpoint"), body: body, expect: [200]))
    }

    /// `DELETE configuration_endpoint?stream_id=`.
    public func delete(streamID: String) async throws {
        _ = try await call("DELETE", try await endpoint("configuration_endpoint", streamID: streamID), expect: [200, 204])
    }

    /// `GET status_endpoint?stream_id=`.
    public func status(streamID: String) async throws -> JSONObject {
        try await call("GET", try await endpoint("status_endpoint", streamID: streamID), expect: [200]) ?? JSONObject()
    }

    /// `POST status_endpoint`: `enabled`, `paused` or `disabled`, with an optional reason.
    public func setStatus(streamID: String, _ status: String, reason: String? = nil) async throws -> JSONObject {
        var body: JSONObject = ["stream_id": .string(streamID), "status": .string(status)]
        if let reason { body["reason"] = .string(reason) }
        return try await call("POST", endpoint("status_endpoint"), body: body, expect: [200]) ?? JSONObject()
    }

    /// `POST add_subject_endpoint` / `remove_subject_endpoint`.
    public func subject(streamID: String, _ subject: JSONObject, add: Bool) async throws {
        let body: JSONObject = ["stream_id": .string(streamID), "subject": .object(subject)]
        _ = try await call("POST", endpoint(add ? "add_subject_endpoint" : "remove_subject_endpoint"), body: body, expect: [200, 204])
    }

    /// `POST verification_endpoint` with `state`: the transmitter then sends a verification event echoing it.
    public func requestVerification(streamID: String, state: String) async throws {
        let body: JSONObject = ["stream_id": .string(streamID), "state": .string(state)]
        _ = try await call("POST", endpoint("verification_endpoint"), body: body, expect: [200, 204])
    }

    /// What one poll brought (RFC 8936 §2.4): SETs by `jti`, in the order the transmitter gave them, and whether more wait.
    public struct PollAnswer: Sendable {
        /// The answer's `sets` as given: each value should be a compact SET (a string).
        public let sets: [(jti: String, set: JSONValue)]
        public let moreAvailable: Bool
    }

    /// RFC 8936 poll: acknowledges `ack` (SETs risc has stored durably), reports `errors` (`jti` →
    /// `{err, description}`, RFC 8935 codes) and asks for at most `maxEvents` more, answered at once.
    /// A 429 or 503 throws `SSFError` with the transmitter's `Retry-After`.
    public func poll(url: String, ack: [String], errors: JSONObject, maxEvents: Int) async throws -> PollAnswer {
        var body: JSONObject = ["ack": .array(ack.map { .string($0) }), "maxEvents": .number(Double(maxEvents)), "returnImmediately": true]
        if !errors.isEmpty { body["setErrs"] = .object(errors) }
        let response = try await authorized("POST", url, body: body)
        guard response.status == 200 else {
            let retryAfter = response.header("retry-after").flatMap(Double.init)
            throw SSFError(status: response.status, "poll \(url) answered \(response.status)", retryAfter: retryAfter)
        }
        guard let answer = try? JSONParser.parseObject(response.body), let sets = answer["sets"]?.objectValue else {
            throw SSFError(status: response.status, "the poll answer has no 'sets' object")
        }
        return PollAnswer(
            sets: sets.map { ($0.key, $0.value) }, moreAvailable: answer["moreAvailable"]?.boolValue ?? false)
    }

    // MARK: Plumbing

    /// A stream configuration answered: its `iss` must be the transmitter's (SSF §8.1.1).
    func checked(_ answer: JSONObject?) throws -> JSONObject {
        guard let answer else { throw SSFError(status: nil, "the transmitter answered without a stream configuration") }
        if let named = answer["iss"]?.stringValue, !SETPolicy.issuerMatches(named, issuer) {
            throw SSFError(status: nil, "the stream configuration names the issuer \(Printable.safe(named, maxBytes: 200)), not \(issuer): this stream is not used again", issuerMismatch: true)
        }
        return answer
    }

    private func endpoint(_ name: String, streamID: String? = nil) async throws -> String {
        guard let url = try await metadata()[name]?.stringValue else { throw SSFError(status: nil, "the transmitter's metadata has no \(name)") }
        guard let streamID else { return url }
        let escaped = streamID.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+"))) ?? streamID
        return url + (url.contains("?") ? "&" : "?") + "stream_id=" + escaped
    }

    /// One management call, its status checked against `expect`; its JSON answer, if any.
    private func call(_ method: String, _ url: String, body: JSONObject? = nil, expect: Set<Int>) async throws -> JSONObject? {
        let response = try await authorized(method, url, body: body)
        guard expect.contains(response.status) else {
            let detail = (try? JSONParser.parseObject(response.body)).flatMap { $0["error"]?.stringValue ?? $0["description"]?.stringValue } ?? ""
            throw SSFError(status: response.status, "\(method) \(url) answered \(response.status)\(detail.isEmpty ? "" : ": " + Printable.safe(detail, maxBytes: 200))")
        }
        return response.body.isEmpty ? nil : try? JSONParser.parseObject(response.body)
    }

    /// A call with a live token; once more with a new token after a 401 (`invalid_token`).
    private func authorized(_ method: String, _ url: String, body: JSONObject?) async throws -> HTTPResponse {
        let response = try await authorized(method, url, body: body, fresh: false)
        return response.status == 401 ? try await authorized(method, url, body: body, fresh: true) : response
    }

    private func authorized(_ method: String, _ url: String, body: JSONObject?, fresh: Bool) async throws -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer " + (try await token(fresh: fresh))), ("Accept", "application/json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        return try await send(HTTPRequest(method: method, url: url, headers: headers, body: body.map { Array(JSONValue.object($0).serialized.utf8) }, timeout: 15))
    }

    private func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        do { return try await http.perform(request) } catch { throw SSFError(status: nil, "\(request.method) \(request.url): \(error)") }
    }

    /// A token that is not about to expire: the cached one, else a new one (`fresh`: a new one whatever is cached).
    func token(fresh: Bool) async throws -> String {
        let credentials: SSFClientCredentials
        switch authorization {
        case .bearer(let token): return token
        case .clientCredentials(let given): credentials = given
        }
        let now = clock()
        if !fresh, let token = cached.withLock({ $0.token != nil && now < $0.expiresAt - Self.tokenMargin ? $0.token : nil }) { return token }
        cached.withLock { $0.token = nil }
        var form = [("grant_type", "client_credentials")]
        if let scope = credentials.scope { form.append(("scope", scope)) }
        var headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        switch credentials.method {
        case .clientSecretBasic:
            let pair = Self.formEscape(credentials.clientID) + ":" + Self.formEscape(credentials.secret ?? "")
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case .clientSecretPost:
            form += [("client_id", credentials.clientID), ("client_secret", credentials.secret ?? "")]
        case .privateKeyJWT:
            guard let signer = credentials.signer else { throw SSFError(status: nil, "private_key_jwt needs a client key") }
            let claims: JSONObject = [
                "iss": .string(credentials.clientID), "sub": .string(credentials.clientID), "aud": .string(credentials.tokenURL),
                "jti": .string(UUID().uuidString), "iat": .number(now.rounded(.down)), "exp": .number(now.rounded(.down) + 60),
            ]
            form += [
                ("client_id", credentials.clientID), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", try signer.sign(claims: claims)),
            ]
        }
        let body = form.map { Self.formEscape($0.0) + "=" + Self.formEscape($0.1) }.joined(separator: "&")
        let response = try await send(HTTPRequest(method: "POST", url: credentials.tokenURL, headers: headers, body: Array(body.utf8), timeout: 15))
        guard response.status == 200, let answer = try? JSONParser.parseObject(response.body), let token = answer["access_token"]?.stringValue, !token.isEmpty
        else {
            throw SSFError(status: response.status, "the token endpoint refused the client credentials (HTTP \(response.status))")
        }
        let lifetime = answer["expires_in"]?.numberValue ?? 300
        cached.withLock { $0 = ($0.metadata, token, now + lifetime) }
        return token
    }

    /// `application/x-www-form-urlencoded` escaping (RFC 6749 Appendix B).
    static func formEscape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? text
    }
}
