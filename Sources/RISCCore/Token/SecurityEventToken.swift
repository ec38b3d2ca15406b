/// The claims of a Security Event Token (RFC 8417 §2.2), read from a verified JWS payload.
///
/// Reading checks the claim *types* (a string `iss`, a number `iat`, an `events` object of
/// objects); whether the values are acceptable to this receiver is `SETPolicy`'s job.
public struct SecurityEventToken: Sendable {
    /// `iss`.
    public let issuer: String?
    /// `aud`, string or array (RFC 7519 §4.1.3).
    public let audience: [String]
    /// `jti`: unique within the issuer's feed; the key for de-duplication.
    public let tokenID: String?
    /// `iat`, seconds since the epoch.
    public let issuedAt: Double?
    /// `txn`, when present (SSF: correlates SETs from one underlying event).
    public let transactionID: String?
    /// `toe`: when the event happened, when present.
    public let timeOfEvent: Double?
    /// RFC 9493 `sub_id`, when present.
    public let subjectID: Subject?
    public let events: [SecurityEvent]
    /// Every claim as sent.
    public let claims: JSONObject

    /// Whether the claims have the shape of an OpenID Connect ID token (`nonce`, or `sub` with `exp`).
    public let looksLikeIDToken: Bool

    /// Reads the claims. Throws `invalid_request` for a payload that is not a SET.
    public init(payload: [UInt8]) throws(SETError) {
        let claims: JSONObject
        do { claims = try JSONParser.parseObject(payload) } catch {
            throw SETError(.invalidRequest, "JWT claims are not a valid JSON object: \(error)", underlying: error)
        }
        self.claims = claims
        var issuer: String?, tokenID: String?, transactionID: String?
        var issuedAt: Double?, timeOfEvent: Double?
        var audience: [String] = []
        var subjectID: Subject?
        var eventsValue: JSONValue?
        var hasNonce = false, hasSub = false, hasExp = false
        // One pass over the members (this runs for every request).
        for (name, value) in claims {
            switch name {
            case "iss":
                guard let text = value.stringValue else { throw .invalidRequest("'iss' is not a string") }
                issuer = text
            case "aud":
                switch value {
                case .string(let single): audience = [single]
                case .array(let items):
                    for item in items {
                        guard let text = item.stringValue else { throw .invalidRequest("'aud' array holds a non-string") }
                        audience.append(text)
                    }
                default: throw .invalidRequest("'aud' is neither a string nor an array of strings")
                }
            case "jti":
                guard let text = value.stringValue else { throw .invalidRequest("'jti' is not a string") }
                tokenID = text
            case "iat":
                guard let number = value.numberValue else { throw .invalidRequest("'iat' is not a number") }
                guard Self.isPlausibleNumericDate(number) else {
                    throw .invalidRequest("'iat' is not a NumericDate between 1970 and 9999 (seconds, not milliseconds)")
                }
                issuedAt = number
            case "toe":
                guard let number = value.numberValue else { throw .invalidRequest("'toe' is not a number") }
                guard Self.isPlausibleNumericDate(number) else {
                    throw .invalidRequest("'toe' is not a NumericDate between 1970 and 9999 (seconds, not milliseconds)")
                }
                timeOfEvent = number
            case "txn":
                guard let text = value.stringValue else { throw .invalidRequest("'txn' is not a string") }
                transactionID = text
            case "sub_id":
                guard let object = value.objectValue else { throw .invalidRequest("'sub_id' is not an object") }
                subjectID = try Subject.parse(object)
            case "events": eventsValue = value
            case "nonce": hasNonce = true
            case "sub": hasSub = true
            case "exp": hasExp = true
            default: break
            }
        }
        self.issuer = issuer
        self.audience = audience
        self.tokenID = tokenID
        self.issuedAt = issuedAt
        self.timeOfEvent = timeOfEvent
        self.transactionID = transactionID
        self.subjectID = subjectID
        self.looksLikeIDToken = hasNonce || (hasSub && hasExp)

        // RFC 8417 §4.3: a SET must carry `events`, so other JWTs (a Google ID token shares
        // Google's keys, issuer and our audience) cannot pass as one.
        guard let eventsValue else {
            throw .invalidRequest("no 'events' claim: this JWT is not a Security Event Token")
        }
        guard let eventsObject = eventsValue.objectValue, !eventsObject.isEmpty else {
            throw .invalidRequest("'events' is not a non-empty JSON object")
        }
        var events: [SecurityEvent] = []
        events.reserveCapacity(eventsObject.count)
        for (uri, payload) in eventsObject {
            let type = EventType(uri)
            guard type.isKnown || Self.looksLikeURI(uri) else { throw .invalidRequest("event type is not a URI") }
            guard let object = payload.objectValue else { throw .invalidRequest("event payload is not a JSON object") }
            events.append(try SecurityEvent(type: type, payload: object, topLevelSubject: subjectID))
        }
        self.events = events
    }

    /// The last second of the year 9999, the largest NumericDate risc accepts.
    public static let latestNumericDate: Double = 253_402_300_799

    /// RFC 7519 §2: a NumericDate counts seconds since 1970. A negative one, or one past the year
    /// 9999 (a millisecond count, say, or 1e19), is not a time any transmitter meant: the token is
    /// refused as malformed (400 `invalid_request`, so the transmitter does not retry it forever)
    /// rather than stored with a time nothing downstream can order or print.
    public static func isPlausibleNumericDate(_ value: Double) -> Bool {
        value.isFinite && value >= 0 && value <= latestNumericDate
    }

    /// RFC 8417 §1.2: the event identifier "MUST be a URI": a scheme, a colon, something after.
    static func looksLikeURI(_ text: String) -> Bool {
        var sawColon = false
        var position = 0
        for byte in text.utf8 {
            if byte <= 0x20 || byte == 0x7F { return false }
            if !sawColon {
                if byte == UInt8(ascii: ":") {
                    if position == 0 { return false }
                    sawColon = true
                } else if position == 0
                    ? !byte.isASCIILetter
                    : !(byte.isASCIILetter || byte.isASCIIDigit || byte == 0x2B || byte == 0x2D || byte == 0x2E)
                {
                    return false
                }
            }
            position += 1
        }
        return sawColon && text.utf8.last != UInt8(ascii: ":")
    }
}

extension UInt8 {
    var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
    var isASCIIDigit: Bool { (0x30...0x39).contains(self) }
}
