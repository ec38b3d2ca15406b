import Synchronization

/// One party that pushes SETs to risc: Google in its 2018 RISC dialect, or any Shared Signals
/// (SSF 1.0) transmitter, each with its own keys, claim rules and push credential.
public struct Transmitter: Sendable {
    /// How its SETs are shaped: `google` (RISC 2018, Google's stream API; `typ` optional) or `ssf`
    /// (SSF 1.0 / CAEP 1.0; `typ` must be `secevent+jwt`).
    public enum Dialect: String, Sendable, CaseIterable {
        case google, ssf
    }

    /// The issuer Google's discovery document names.
    public static let googleIssuer = "https://accounts.google.com"

    /// Its name in the configuration, the event log and metrics.
    public let name: String
    public let dialect: Dialect
    /// The issuer the unverified `iss` is matched against when several transmitters share a path
    /// (nil: whatever its discovery document names; it then takes what no other claims); the
    /// verified `iss` must equal the key set's issuer all the same.
    public let issuer: String?
    public let verifier: SETVerifier
    /// Its own push path; nil: the shared events path.
    public let path: String?
    /// The `Authorization` values risc gave it for pushes (nil: none asked); SIGHUP may replace them.
    public let credential: PushCredential?

    public init(name: String, dialect: Dialect, issuer: String?, verifier: SETVerifier, path: String? = nil, authorization: [String]? = nil) {
        self.name = name
        self.dialect = dialect
        self.issuer = issuer
        self.verifier = verifier
        self.path = path
        credential = authorization.map(PushCredential.init)
    }

    /// Whether it may name `claimed` as its `iss` (its issuer or an alias, one trailing `/` apart).
    public func claims(issuer claimed: String) -> Bool {
        issuer.map { SETPolicy.issuerMatches(claimed, $0) } == true || verifier.policy.issuerAliases.contains { SETPolicy.issuerMatches(claimed, $0) }
    }

    /// RFC 8935 §2.3 and RFC 7235: a push without the `Authorization` value risc gave this
    /// transmitter, or with another, is 401 `authentication_failed`. Compared as SHA-256 digests in
    /// constant time, so neither the value nor its length leaks through timing.
    public func authenticate(_ header: String?) throws(SETError) {
        guard let credential else { return }
        let (digests, scheme) = credential.current
        // Every value compared, none skipped on a match: the time says nothing of which matched.
        let offered = header.map { SHA256.hash(Array(PushCredential.normalized($0).utf8)) }
        let matched = digests.reduce(false) { found, digest in (offered.map { TokenFingerprint.constantTimeEquals($0, digest) } ?? false) || found }
        guard header != nil, matched else {
            var error = SETError(.authenticationFailed, header == nil ? "no Authorization header" : "the Authorization header is not the one this endpoint expects")
            error.status = 401
            error.challenge = scheme
            throw error
        }
    }
}

/// The `Authorization` values a transmitter must push with: one, or two while it is rotated (the
/// new one added, the stream told, the old one removed), kept only as SHA-256 digests.
public final class PushCredential: Sendable {
    private let state: Mutex<(digests: [[UInt8]], scheme: String)>

    public init(_ values: [String]) { state = Mutex(Self.digest(values)) }

    /// The digests accepted now, and the scheme a 401's `WWW-Authenticate` names (the first value's).
    public var current: (digests: [[UInt8]], scheme: String) { state.withLock { $0 } }

    /// Takes `values` in place of the ones held; returns whether they differ.
    @discardableResult
    public func replace(with values: [String]) -> Bool {
        let next = Self.digest(values)
        return state.withLock { held in
            defer { held = next }
            return held.digests != next.digests
        }
    }

    private static func digest(_ values: [String]) -> (digests: [[UInt8]], scheme: String) {
        (values.map { SHA256.hash(Array(normalized($0).utf8)) }, values.first?.split(separator: " ").first.map(String.init) ?? "Bearer")
    }

    /// An `Authorization` value as HTTP compares it (RFC 9110 §11.1, §11.4): the scheme in any
    /// case, one or more spaces before the credentials, which stay exactly as they are. A value
    /// without credentials is left as it is.
    public static func normalized(_ value: String) -> String {
        guard let space = value.firstIndex(of: " ") else { return value }
        let credentials = value[space...].drop { $0 == " " }
        return credentials.isEmpty ? value : value[..<space].lowercased() + " " + credentials
    }
}

/// SSF's delivery methods (SSF 1.0 §6.1.1).
public enum SSFDelivery {
    /// RFC 8935 push.
    public static let push = "urn:ietf:rfc:8935"
    /// RFC 8936 poll.
    public static let poll = "urn:ietf:rfc:8936"
}

/// The transmitters risc receives from, by push path: each path serves one transmitter, or
/// several that share it, told apart by the unverified `iss` (used only to choose keys).
public struct Transmitters: Sendable {
    public let all: [Transmitter]
    /// Those with a push path of their own, by path.
    private let byPath: [String: [Transmitter]]
    /// Those served on the shared events path.
    private let shared: [Transmitter]
    /// The shared events path; nil: whatever path the caller routes to the intake.
    public let sharedPath: String?

    public init(_ all: [Transmitter], sharedPath: String?) {
        self.all = all
        self.sharedPath = sharedPath
        byPath = Dictionary(grouping: all.filter { $0.path != nil }, by: { $0.path ?? "" })
        shared = all.filter { $0.path == nil }
    }

    /// Whether `path` is one that receives SETs.
    public func serves(_ path: Substring) -> Bool {
        byPath[String(path)] != nil || (!shared.isEmpty && (sharedPath.map { path == $0 } ?? false))
    }

    /// The transmitters served on `path` (nil: every one, as for `risc replay`).
    public func candidates(on path: String?) -> [Transmitter] {
        guard let path else { return all }
        if let own = byPath[path] { return own }
        return sharedPath == nil || path == sharedPath ? shared : []
    }

    /// Which of several transmitters sharing a path sent `jws`, by its unverified `iss`: only to
    /// choose whose keys and rules verify it. An `iss` naming none of them is `invalid_issuer`
    /// (the description names no configured issuer: the caller is not authenticated yet).
    public static func pick(_ candidates: [Transmitter], _ jws: CompactJWS) throws(SETError) -> Transmitter {
        guard let payload = try? JSONParser.parseObject(jws.payload) else { throw .invalidRequest("JWS payload is not a JSON object") }
        guard let issuer = payload["iss"]?.stringValue else { throw SETError(.invalidIssuer, "no 'iss' claim") }
        guard let transmitter = candidates.first(where: { $0.claims(issuer: issuer) }) ?? candidates.first(where: { $0.issuer == nil }) else {
            throw SETError(.invalidIssuer, "'iss' names no transmitter this endpoint receives from")
        }
        return transmitter
    }
}
