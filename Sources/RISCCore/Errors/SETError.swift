/// A rejection of a Security Event Token: the sender's fault, answered with HTTP 400.
///
/// RFC 8935 §2.3: "the SET Recipient MUST respond with … HTTP 400 … [and] a JSON object …
/// [with] `err` … [and] `description`". Each rejection carries one of the RFC 8935 §2.4
/// codes and a description that is safe to send back: it never echoes the token or any
/// secret. Errors compare by `code` only.
public struct SETError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An RFC 8935 §2.4 (IANA "Security Event Token Error Codes") error code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case invalidRequest = "invalid_request"
            case invalidKey = "invalid_key"
            case invalidIssuer = "invalid_issuer"
            case invalidAudience = "invalid_audience"
            case authenticationFailed = "authentication_failed"
            case accessDenied = "access_denied"
            case invalidState = "invalid_state"
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The SET cannot be parsed, or an event payload does not match its event type.
        public static let invalidRequest = Code(.invalidRequest)
        /// The signing key is unknown, unusable or unacceptable.
        public static let invalidKey = Code(.invalidKey)
        /// The SET issuer is not acceptable to this recipient.
        public static let invalidIssuer = Code(.invalidIssuer)
        /// The SET audience does not match this recipient.
        public static let invalidAudience = Code(.invalidAudience)
        /// The transmitter could not be authenticated: here, the signature does not verify.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// The transmitter is not authorised to send this SET to this recipient.
        public static let accessDenied = Code(.accessDenied)
        /// SSF 1.0 §11: a verification event's `state` is not what the receiver expected.
        public static let invalidState = Code(.invalidState)

        public static let all: [Code] = [
            .invalidRequest, .invalidKey, .invalidIssuer, .invalidAudience, .authenticationFailed, .accessDenied,
            .invalidState,
        ]

        /// The `err` string on the wire.
        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }

        public init?(rawValue: String) {
            guard let base = Base(rawValue: rawValue) else { return nil }
            self.base = base
        }
    }

    public let code: Code
    /// Human-readable, safe to send: no token, no key material.
    public let description: String
    /// What went wrong underneath (for logs only; never sent).
    public let underlying: (any Error)?
    /// Members the event log's line adds (never sent to the client): for `invalid_audience`, the
    /// `aud` that arrived, escaped and bounded, so an operator sees which client id was used.
    public var logFields = JSONObject()
    /// The HTTP status it is answered with: 400 (RFC 8935 §2.3), or 401 for a push without the
    /// transmitter's `Authorization` (RFC 7235), which then names `challenge` in `WWW-Authenticate`.
    public var status = 400
    public var challenge: String?
    public let file: String
    public let line: Int

    public init(
        _ code: Code, _ description: String, underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        // Descriptions may quote what arrived (an `alg`, a member name): never raw control
        // characters, never more than a short line, whatever a caller passes.
        self.description = Printable.safe(description, maxBytes: SETError.maxDescriptionBytes)
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// The longest description sent or logged, in UTF-8 bytes.
    public static let maxDescriptionBytes = 300

    public static func == (lhs: SETError, rhs: SETError) -> Bool { lhs.code == rhs.code }

    /// The RFC 8935 response body: `{"err": …, "description": …}`.
    public var responseBody: String {
        JSONValue.object(JSONObject(["err": .string(code.rawValue), "description": .string(description)])).serialized
    }

    static func invalidRequest(_ text: String, file: String = #fileID, line: Int = #line) -> SETError {
        SETError(.invalidRequest, text, file: file, line: line)
    }
}

/// Our side cannot decide right now: no usable key set (the issuer's JWKS cannot be fetched
/// and no fresh-enough copy is cached). Temporary: answered with 503 so the transmitter retries.
public struct KeyUnavailableError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public let underlying: (any Error)?

    public init(_ description: String, underlying: (any Error)? = nil) {
        self.description = description
        self.underlying = underlying
    }
}
