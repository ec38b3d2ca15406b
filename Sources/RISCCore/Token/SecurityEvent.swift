/// One entry of a SET's `events` claim: its type and payload (RFC 8417 §2.2).
public struct SecurityEvent: Sendable, Equatable {
    public let type: EventType
    /// The subject: the event's own `subject`, else the SET's top-level `sub_id`.
    public let subject: Subject?
    /// The raw event payload object.
    public let payload: JSONObject

    /// What the action table's reason column keys on: `account-disabled`'s `reason` (`hijacking`,
    /// `bulk-account`, or absent), an OAuth revocation's reason; for CAEP 1.0 events, the member
    /// that says what changed: `credential-change`'s `change_type` (`create`, `revoke`, `update`,
    /// `delete`), `device-compliance-change`'s `current_status` (`compliant`, `not-compliant`),
    /// `assurance-level-change`'s and `risk-level-change`'s `current_level`.
    public var reason: String? {
        if let reason = payload["reason"]?.stringValue { return reason }
        guard let member = Self.caepReasonMembers[type.canonical] else { return nil }
        return payload[member]?.stringValue
    }

    /// CAEP's member that plays `reason`'s part, by event type.
    static let caepReasonMembers: [EventType: String] = [
        .credentialChange: "change_type", .deviceComplianceChange: "current_status", .assuranceLevelChange: "current_level",
        .riskLevelChange: "current_level",
    ]
    /// A verification event's `state`.
    public var state: String? { payload["state"]?.stringValue }
    /// CAEP's `event_timestamp`: when the event happened, in seconds. A value past the year 5000 is
    /// read as milliseconds, which some transmitters sent (the conformance suite did until
    /// 2026-09-30).
    public let eventTimestamp: Double?

    init(type: EventType, payload: JSONObject, topLevelSubject: Subject?) throws(SETError) {
        self.type = type
        self.payload = payload
        if let value = payload["subject"] {
            guard let object = value.objectValue else { throw .invalidRequest("event subject is not a JSON object") }
            subject = try Subject.parse(object)
        } else {
            subject = topLevelSubject
        }
        if let value = payload["event_timestamp"] {
            guard let number = value.numberValue, number.isFinite, number >= 0 else {
                throw .invalidRequest("event member 'event_timestamp' is not a non-negative number")
            }
            eventTimestamp = number >= 1e11 ? number / 1_000 : number
        } else {
            eventTimestamp = nil
        }
        // Payload members with a type the event definition fixes.
        for name in ["reason", "state"] {
            if let value = payload[name], value.stringValue == nil {
                throw .invalidRequest("event member '\(Printable.safe(name, maxBytes: 40))' is not a string")
            }
        }
        let canonical = type.knownCanonical
        if let canonical, EventType.needsSubject(canonical: canonical), subject == nil {
            throw .invalidRequest("\(canonical.shortName) event has no subject")
        }
        if canonical == .tokenRevoked {
            guard case .oauthToken? = subject else {
                throw .invalidRequest("token-revoked event needs an oauth_token subject")
            }
        }
    }

    /// A compact JSON view for the CLI and logs (no token material).
    public var json: JSONValue {
        var object = JSONObject()
        object["type"] = .string(type.uri)
        if type.canonical != type { object["canonical_type"] = .string(type.canonical.uri) }
        object["known"] = .bool(type.isKnown)
        if let subject { object["subject"] = subject.json }
        if let reason { object["reason"] = .string(reason) }
        if let state { object["state"] = .string(state) }
        return .object(object)
    }
}
