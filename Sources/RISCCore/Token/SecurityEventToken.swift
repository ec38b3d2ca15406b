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

    /// Reads the claims. Throws `invalid_request` for a payload that is not a SET.
    public init(payload: [UInt8]) throws(SETError) {
        let claims: JSONObject
        do { claims = try JSONParser.parseObject(payload) } catch {
            throw SETError(.invalidRequest, "JWT claims are not a JSON object", underlying: error)
        }
        self.claims = claims

        if let value = claims["iss"], value.stringValue == nil { throw .invalidRequest("'iss' is not a string") }
        issuer = claims["iss"]?.stringValue

        switch claims["aud"] {
        case nil: audience = []
        case .string(let single)?: audience = [single]
        case .array(let items)?:
            var values: [String] = []
            for item in items {
                guard let text = item.stringValue else { throw .invalidRequest("'aud' array holds a non-string") }
                values.append(text)
            }
            audience = values
        default: throw .invalidRequest("'aud' is neither a string nor an array of strings")
        }

        if let value = claims["jti"], value.stringValue == nil { throw .invalidRequest("'jti' is not a string") }
        tokenID = claims["jti"]?.stringValue
        if let value = claims["iat"], value.numberValue == nil { throw .invalidRequest("'iat' is not a number") }
        issuedAt = claims["iat"]?.numberValue
        if let value = claims["toe"], value.numberValue == nil { throw .invalidRequest("'toe' is not a number") }
        timeOfEvent = claims["toe"]?.numberValue
        if let value = claims["txn"], value.stringValue == nil { throw .invalidRequest("'txn' is not a string") }
        transactionID = claims["txn"]?.stringValue

        if let value = claims["sub_id"] {
            guard let object = value.objectValue else { throw .invalidRequest("'sub_id' is not an object") }
            subjectID = try Subject.parse(object)
        } else {
            subjectID = nil
        }

        // RFC 8417 §4.3: a SET must carry `events`, so other JWTs (a Google ID token shares
        // Google's keys, issuer and our audience) cannot pass as one.
        guard let eventsValue = claims["events"] else {
            throw .invalidRequest("no 'events' claim: this JWT is not a Security Event Token")
        }
        guard let eventsObject = eventsValue.objectValue, !eventsObject.isEmpty else {
            throw .invalidRequest("'events' is not a non-empty JSON object")
        }
        var events: [SecurityEvent] = []
        for (uri, payload) in eventsObject {
            guard Self.looksLikeURI(uri) else { throw .invalidRequest("event type is not a URI") }
            guard let object = payload.objectValue else { throw .invalidRequest("event payload is not a JSON object") }
            events.append(try SecurityEvent(type: EventType(uri), payload: object, topLevelSubject: subjectID))
        }
        self.events = events
    }

    /// RFC 8417 §1.2: the event identifier "MUST be a URI": a scheme, a colon, something after.
    static func looksLikeURI(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")), colon > 0, colon < utf8.count - 1,
            utf8[0].isASCIILetter
        else { return false }
        return utf8[..<colon].allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }
            && !utf8.contains { $0 <= 0x20 || $0 == 0x7F }
    }
}

extension UInt8 {
    var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
    var isASCIIDigit: Bool { (0x30...0x39).contains(self) }
}
