import Foundation
import RISCCore
import Synchronization

/// A stand-in for Google's discovery document and JWKS endpoint on loopback, for tests and
/// `risc dev-issuer`. What it serves can be changed while it runs: the key set, its
/// `Cache-Control: max-age`, whether it answers 304 to a matching `If-None-Match`, or whether
/// it fails.
public final class LocalIssuer: Sendable {
    public struct Settings: Sendable {
        /// The JWK Set served at `/jwks`.
        public var jwks: String
        /// The `issuer` the discovery document names; nil → the server's own base URL.
        public var issuer: String?
        public var maxAge: Int? = 300
        public var etag: String? = nil
        /// Answer every request with this status instead (500, 503 …).
        public var failWith: Int? = nil
        /// Serve this `jwks_uri` instead of the local one.
        public var jwksURI: String? = nil
        /// Sleep this long before answering the JWKS (to hold fetches in flight).
        public var jwksDelay: Double = 0
    }

    /// What the server closure and the owner share.
    private final class State: Sendable {
        let settings: Mutex<Settings>
        let counts = Mutex<[String: Int]>([:])
        init(_ settings: Settings) { self.settings = Mutex(settings) }
    }

    public let server: LoopbackHTTPServer
    private let state: State

    public init(jwks: String, issuer: String? = nil, port: Int = 0) throws {
        let state = State(Settings(jwks: jwks, issuer: issuer))
        self.state = state
        self.server = try LoopbackHTTPServer(port: port) { request in
            let current = state.settings.withLock { $0 }
            let path = String(request.path.prefix { $0 != "?" })
            state.counts.withLock { $0[path, default: 0] += 1 }
            if let status = current.failWith { return .json(#"{"error":"failing on purpose"}"#, status: status) }
            switch path {
            case "/.well-known/risc-configuration", "/.well-known/ssf-configuration":
                // Google's document, or the same issuer as an SSF 1.0 transmitter's metadata (SSF §6.1).
                let base = "http://127.0.0.1:\(request.header("host")?.split(separator: ":").last ?? "0")"
                var document: JSONObject = ["issuer": .string(current.issuer ?? base), "jwks_uri": .string(current.jwksURI ?? base + "/jwks")]
                if path.hasSuffix("ssf-configuration") {
                    document["spec_version"] = "1_0"
                    document["delivery_methods_supported"] = ["urn:ietf:rfc:8935", "urn:ietf:rfc:8936"]
                } else {
                    document["delivery_methods_supported"] = ["https://schemas.openid.net/secevent/risc/delivery-method/push"]
                }
                return .json(JSONValue.object(document).serialized, headers: [("Cache-Control", "public, max-age=3600")])
            case "/jwks":
                if current.jwksDelay > 0 { Thread.sleep(forTimeInterval: current.jwksDelay) }
                var headers: [(name: String, value: String)] = []
                if let maxAge = current.maxAge { headers.append(("Cache-Control", "public, max-age=\(maxAge), must-revalidate")) }
                if let etag = current.etag {
                    headers.append(("ETag", etag))
                    if request.header("if-none-match") == etag { return .init(status: 304, headers: headers) }
                }
                return .json(current.jwks, headers: headers)
            default:
                return .json(#"{"error":"not found"}"#, status: 404)
            }
        }
    }

    public var baseURL: String { server.baseURL }
    public var discoveryURL: String { server.baseURL + "/.well-known/risc-configuration" }

    /// Changes what is served.
    public func update(_ change: (inout Settings) -> Void) { state.settings.withLock { change(&$0) } }

    /// Requests seen for a path (`/jwks`, `/.well-known/risc-configuration`).
    public func requests(to path: String) -> Int { state.counts.withLock { $0[path] ?? 0 } }

    public func stop() { server.stop() }

    /// An issuer let go stops its server (whose accept thread holds the server, not the issuer):
    /// each test's issuer left a thread and a listening socket behind for the process's life.
    deinit { server.stop() }
}
