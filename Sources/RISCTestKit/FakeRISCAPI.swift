import Foundation
import RISCClient
public import RISCCore
public import Synchronization

/// A stand-in for Google's RISC management API (spec §1.10) on 127.0.0.1, strict where Google
/// is: every request must carry a service-account bearer JWT that verifies against the
/// account's public key with exactly the claims Google wants, every body is checked, and errors
/// come back with Google's status codes and messages (spec §1.10.6) in Google's JSON error shape.
///
/// `stream:verify` does what Google does: it signs a verification SET carrying the `state` with
/// the issuer key and POSTs it to the configured delivery URL, in the background.
public final class FakeRISCAPI: Sendable {
    public struct Configuration: Sendable {
        public var clientEmail: String
        public var keyID: String
        public var publicKey: PublicKey
        /// Domains the project has authorized; the delivery URL's host must be one or under one.
        public var authorizedDomains: [String] = ["localhost"]
        /// Signs the verification SETs (the issuer's key, the receiver's audience).
        public var issuer: SETFactory
        /// CA bundle for pushing to an HTTPS receiver with a test certificate.
        public var deliveryCABundle: String?
        /// The site's issuer for unlink notices (`POST /v1/events:publish`): the fake reads its
        /// discovery document and JWKS from there, as Google would, to check each notice.
        public var noticeIssuer: String?
        public var noticeAudience = UnlinkNotices.defaultAudience
        public init(clientEmail: String, keyID: String, publicKey: PublicKey, issuer: SETFactory) {
            self.clientEmail = clientEmail
            self.keyID = keyID
            self.publicKey = publicKey
            self.issuer = issuer
        }
    }

    /// What the fake has seen and holds; tests read and change it.
    public struct State: Sendable {
        public var stream: JSONObject?
        public var status = "enabled"
        /// Each request as "METHOD path", in order, with why a bearer token was refused, if it was.
        public var requests: [String] = []
        public var refusals: [String] = []
        /// Answer every request with this error (status, message) instead, until cleared.
        public var forcedError: (status: Int, message: String)?
        /// HTTP statuses the receiver answered to pushed verification SETs.
        public var deliveries: [Int] = []
        /// Delay before a verification SET is pushed, seconds.
        public var deliveryDelay: Double = 0.05
        /// Unlink notices accepted: their claims, with the header's `kid` added as `_kid`.
        public var notices: [JSONObject] = []
        /// Why notices were refused (400), in order.
        public var noticeRefusals: [String] = []
        /// Answer this many of the next publish calls 503 (each one counts down).
        public var failPublishes = 0
        /// Publish calls answered 503.
        public var publishFailures = 0
        /// Seconds each publish call waits before it is answered (a slow Google).
        public var publishDelay: Double = 0
        /// Where the site's `noticeIssuer` host really is (`http://127.0.0.1:PORT`): the fake
        /// fetches the issuer's documents there, as DNS would send Google (the issuer keeps its name).
        public var noticeOrigin: String?
    }

    /// A fake that accepts `account`'s bearer tokens and checks unlink notices from `noticeIssuer`.
    public static func forNotices(account: TestServiceAccount, noticeIssuer: String) throws -> FakeRISCAPI {
        let keys = try KeyDirectory.repositoryTestKeys()
        var configuration = Configuration(
            clientEmail: account.clientEmail, keyID: account.keyID, publicKey: account.key.publicKey,
            issuer: SETFactory(signer: keys.entries.first { $0.algorithm == .rs256 }!.signer))
        configuration.noticeIssuer = noticeIssuer
        return try FakeRISCAPI(configuration: configuration)
    }

    public let configuration: Configuration
    public let state = Mutex(State())
    private let server = Mutex<LoopbackHTTPServer?>(nil)

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        let server = try LoopbackHTTPServer { [weak self] request in
            self?.handle(request) ?? .init(status: 503)
        }
        self.server.withLock { $0 = server }
    }

    public var baseURL: String { server.withLock { $0!.baseURL } }

    public func stop() { server.withLock { $0?.stop() } }

    static func error(_ status: Int, _ message: String) -> LoopbackHTTPServer.Response {
        let name = [400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"][status] ?? "UNKNOWN"
        let body: JSONValue = ["error": ["code": .number(Double(status)), "message": .string(message), "status": .string(name)]]
        return .json(body.serialized, status: status)
    }

    /// Why the bearer token is refused, or nil when it is good.
    func refusal(_ authorization: String?, now: Double) -> String? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return "no bearer token" }
        let token = String(authorization.dropFirst("Bearer ".count))
        guard let jws = try? CompactJWS(token) else { return "not a compact JWS" }
        guard jws.header.algorithm == .rs256 else { return "alg is not RS256" }
        guard jws.header.keyID == configuration.keyID else { return "kid is not the key's private_key_id" }
        guard configuration.publicKey.verify(signature: jws.signature, message: jws.signingInput, algorithm: .rs256) else {
            return "signature does not verify"
        }
        guard let claims = try? JSONParser.parseObject(jws.payload) else { return "payload is not JSON" }
        guard claims["iss"]?.stringValue == configuration.clientEmail else { return "iss is not the client email" }
        guard claims["sub"]?.stringValue == configuration.clientEmail else { return "sub is not the client email" }
        guard claims["aud"]?.stringValue == ServiceAccount.audience else { return "aud is not the RISC management service" }
        guard let iat = claims["iat"]?.numberValue, let exp = claims["exp"]?.numberValue else { return "iat or exp missing" }
        guard abs(iat - now) <= 300 else { return "iat is not now" }
        guard exp - iat == 3_600 else { return "exp is not iat + 3600" }
        guard exp > now else { return "expired" }
        return nil
    }

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        let now = systemNow()
        let refusal = refusal(request.header("authorization"), now: now)
        let forced = state.withLock { state -> (Int, String)? in
            state.requests.append("\(request.method) \(request.path)")
            if let refusal { state.refusals.append(refusal) }
            return state.forcedError
        }
        if refusal != nil { return Self.error(401, "Unauthorized.") }
        if let (status, message) = forced { return Self.error(status, message) }
        let body = request.body.isEmpty ? nil : try? JSONParser.parseObject(request.body)
        switch (request.method, request.path) {
        case ("GET", "/v1beta/stream"):
            guard var stream = state.withLock({ $0.stream }) else { return Self.error(404, "Project has no RISC configuration.") }
            stream["events_supported"] = .array(EventType.google.map { .string($0.uri) })
            stream["events_delivered"] = stream["events_requested"]
            return .json(JSONValue.object(stream).serialized)
        case ("POST", "/v1beta/stream:update"):
            return update(body)
        case ("GET", "/v1beta/stream/status"):
            guard let status = state.withLock({ $0.stream == nil ? nil : $0.status }) else {
                return Self.error(404, "Project has no RISC configuration.")
            }
            return .json(JSONValue.object(["status": .string(status)]).serialized)
        case ("POST", "/v1beta/stream/status:update"):
            guard let status = body?["status"]?.stringValue, status == "enabled" || status == "disabled" else {
                return Self.error(403, "Unsupported status.")
            }
            let found = state.withLock { state -> Bool in
                guard state.stream != nil else { return false }
                state.status = status
                return true
            }
            guard found else { return Self.error(404, "Project has no RISC configuration, cannot update status.") }
            return .json(JSONValue.object(["status": .string(status)]).serialized)
        case ("POST", "/v1/events:publish"):
            return publish(request)
        case ("POST", "/v1beta/stream:verify"):
            guard let stream = state.withLock({ $0.stream }) else { return Self.error(404, "Project has no RISC configuration.") }
            guard let state = body?["state"]?.stringValue else { return Self.error(400, "Request must contain state field.") }
            let requested = stream["events_requested"]?.arrayValue?.compactMap(\.stringValue) ?? []
            if self.state.withLock({ $0.status }) == "enabled", requested.contains(EventType.verification.uri),
                let url = stream["delivery"]?.objectValue?["url"]?.stringValue
            {
                push(state: state, to: url)
            }
            return .json("{}")
        default:
            return Self.error(404, "Not found.")
        }
    }

    /// An unlink notice: the SET from the body (`{"set": …}` as JSON, or bare as
    /// `application/secevent+jwt`), verified with the key the site's JWKS publishes under its `kid`
    /// (found through `<iss>/.well-known/risc-configuration`), with the claims the defaults promise.
    func publish(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        let delay = state.withLock { $0.publishDelay }
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        let failing = state.withLock { state -> Bool in
            guard state.failPublishes > 0 else { return false }
            state.failPublishes -= 1
            state.publishFailures += 1
            return true
        }
        if failing { return Self.error(503, "The service is currently unavailable.") }
        switch checkNotice(request) {
        case .success(let claims):
            state.withLock { $0.notices.append(claims) }
            return .json("{}")
        case .failure(let refusal):
            state.withLock { $0.noticeRefusals.append(refusal.description) }
            return Self.error(400, refusal.description)
        }
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func checkNotice(_ request: LoopbackHTTPServer.Request) -> Result<JSONObject, Refusal> {
        Result { () throws(Refusal) -> JSONObject in
            let token: String
            switch request.header("content-type") {
            case "application/json":
                guard let body = try? JSONParser.parseObject(request.body), let set = body["set"]?.stringValue else {
                    throw Refusal("JSON body without a 'set' string")
                }
                token = set
            case "application/secevent+jwt":
                token = String(decoding: request.body, as: UTF8.self)
            default:
                throw Refusal("unexpected content type")
            }
            guard let jws = try? CompactJWS(token) else { throw Refusal("not a compact JWS") }
            guard jws.header.algorithm == .rs256 else { throw Refusal("alg is not RS256") }
            guard jws.header.type == "secevent+jwt" else { throw Refusal("typ is not secevent+jwt") }
            guard let kid = jws.header.keyID else { throw Refusal("no kid") }
            guard let issuer = configuration.noticeIssuer else { throw Refusal("the fake has no notice issuer") }
            let client = CurlHTTPClient.patient(caBundlePath: configuration.deliveryCABundle)
            let origin = state.withLock { $0.noticeOrigin }
            func located(_ url: String) -> String { origin.map { $0 + UnlinkNotices.path(of: url) } ?? url }
            guard let discovery = try? client.performBlocking(HTTPRequest(method: "GET", url: located(UnlinkNotices.discoveryURL(issuer: issuer)))),
                discovery.status == 200, let document = try? JSONParser.parseObject(discovery.body)
            else { throw Refusal("cannot read the site's discovery document") }
            guard document["issuer"]?.stringValue == issuer, let jwksURI = document["jwks_uri"]?.stringValue else {
                throw Refusal("discovery document without the issuer or jwks_uri")
            }
            guard let fetched = try? client.performBlocking(HTTPRequest(method: "GET", url: located(jwksURI))), fetched.status == 200,
                let keys = try? JWKSet(json: fetched.body)
            else { throw Refusal("cannot read the site's JWKS") }
            guard let publicKey = keys.key(for: kid)?.key else { throw Refusal("kid \(kid) is not in the site's JWKS") }
            guard publicKey.verify(signature: jws.signature, message: jws.signingInput, algorithm: .rs256) else {
                throw Refusal("signature does not verify with the published key")
            }
            guard var claims = try? JSONParser.parseObject(jws.payload) else { throw Refusal("payload is not JSON") }
            guard claims["iss"]?.stringValue == issuer else { throw Refusal("iss is not the site's issuer") }
            guard claims["aud"]?.stringValue == configuration.noticeAudience else { throw Refusal("aud is not \(configuration.noticeAudience)") }
            guard let iat = claims["iat"]?.numberValue, iat <= systemNow() + 60 else { throw Refusal("iat missing or in the future") }
            guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { throw Refusal("no jti") }
            guard claims["exp"] == nil else { throw Refusal("exp present") }
            guard let events = claims["events"]?.objectValue, events.count == 1,
                let event = events[EventType.tokenRevoked.uri]?.objectValue
            else { throw Refusal("events is not one token-revoked event") }
            guard event["subject_type"]?.stringValue == "oauth_token",
                ["access_token", "refresh_token"].contains(event["token_type"]?.stringValue ?? ""),
                event["token_identifier_alg"]?.stringValue == "hash_SHA512_double",
                let hex = event["token"]?.stringValue, hex.count == 128, hex.allSatisfy({ "0123456789abcdef".contains($0) })
            else { throw Refusal("the event does not name a token by hash_SHA512_double") }
            claims["_kid"] = .string(kid)
            return claims
        }
    }

    func update(_ body: JSONObject?) -> LoopbackHTTPServer.Response {
        guard let body else { return Self.error(400, "Stream configuration must contain delivery field.") }
        guard let delivery = body["delivery"]?.objectValue else { return Self.error(400, "Stream configuration must contain delivery field.") }
        guard delivery["delivery_method"]?.stringValue == RISCManagementClient.pushDeliveryMethod else {
            return Self.error(400, "Stream configuration must contain delivery_method field.")
        }
        guard let url = delivery["url"]?.stringValue else { return Self.error(400, "Stream configuration must contain url field.") }
        guard let events = body["events_requested"]?.arrayValue, !events.isEmpty, events.allSatisfy({ $0.stringValue != nil }) else {
            return Self.error(400, "Stream configuration must contain events_requested field.")
        }
        guard let (scheme, host) = URLPolicy.components(url), scheme == "https" else {
            return Self.error(403, "The delivery endpoint must be an HTTPS URL.")
        }
        guard configuration.authorizedDomains.contains(where: { host == $0 || host.hasSuffix("." + $0) }) else {
            return Self.error(403, "The delivery endpoint does not belong to any of your project's domains.")
        }
        state.withLock { state in
            state.stream = ["delivery": .object(delivery), "events_requested": .array(events)]
            state.status = "enabled"
        }
        return .json("{}")
    }

    func push(state: String, to url: String) {
        let token = try? configuration.issuer.make(type: .verification, subject: nil, extra: ["state": .string(state)])
        let delay = self.state.withLock { $0.deliveryDelay }
        let client = CurlHTTPClient.patient(caBundlePath: configuration.deliveryCABundle)
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            guard let token else { return }
            let status =
                (try? client.performBlocking(
                    HTTPRequest(
                        method: "POST", url: url, headers: [("Content-Type", "application/secevent+jwt")], body: Array(token.utf8))))?.status ?? 0
            self.state.withLock { $0.deliveries.append(status) }
        }
    }
}
