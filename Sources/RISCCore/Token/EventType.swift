/// A security event type: the URI naming an event in a SET's `events` claim (RFC 8417 §2.2).
///
/// Backed by the URI so that unknown types stay representable: they are kept and logged,
/// never an error. `canonical` maps Google's legacy aliases onto the modern URIs.
public struct EventType: Hashable, Sendable, CustomStringConvertible, Comparable {
    public let uri: String

    public init(_ uri: String) { self.uri = uri }

    public var description: String { uri }

    public static func < (lhs: EventType, rhs: EventType) -> Bool { lhs.uri < rhs.uri }

    static let risc = "https://schemas.openid.net/secevent/risc/event-type/"
    static let oauth = "https://schemas.openid.net/secevent/oauth/event-type/"
    static let caep = "https://schemas.openid.net/secevent/caep/event-type/"
    static let ssf = "https://schemas.openid.net/secevent/ssf/event-type/"
    static let googleLegacy = "https://accounts.google.com/risc/event/"

    // Google Cross-Account Protection (spec §1.8). Note `token(s)-revoked` live under `oauth`.
    public static let sessionsRevoked = EventType(risc + "sessions-revoked")
    public static let tokensRevoked = EventType(oauth + "tokens-revoked")
    public static let tokenRevoked = EventType(oauth + "token-revoked")
    public static let accountDisabled = EventType(risc + "account-disabled")
    public static let accountEnabled = EventType(risc + "account-enabled")
    public static let accountCredentialChangeRequired = EventType(risc + "account-credential-change-required")
    public static let verification = EventType(risc + "verification")

    // RISC 1.0 (spec §5.5).
    public static let accountPurged = EventType(risc + "account-purged")
    public static let identifierChanged = EventType(risc + "identifier-changed")
    public static let identifierRecycled = EventType(risc + "identifier-recycled")
    public static let credentialCompromise = EventType(risc + "credential-compromise")
    public static let optIn = EventType(risc + "opt-in")
    public static let optOutInitiated = EventType(risc + "opt-out-initiated")
    public static let optOutCancelled = EventType(risc + "opt-out-cancelled")
    public static let optOutEffective = EventType(risc + "opt-out-effective")
    public static let recoveryActivated = EventType(risc + "recovery-activated")
    public static let recoveryInformationChanged = EventType(risc + "recovery-information-changed")

    // CAEP 1.0 (spec §5.6) and SSF (spec §5.3–5.4).
    public static let sessionRevoked = EventType(caep + "session-revoked")
    public static let tokenClaimsChange = EventType(caep + "token-claims-change")
    public static let credentialChange = EventType(caep + "credential-change")
    public static let assuranceLevelChange = EventType(caep + "assurance-level-change")
    public static let deviceComplianceChange = EventType(caep + "device-compliance-change")
    public static let sessionEstablished = EventType(caep + "session-established")
    public static let sessionPresented = EventType(caep + "session-presented")
    public static let riskLevelChange = EventType(caep + "risk-level-change")
    public static let ssfVerification = EventType(ssf + "verification")
    public static let streamUpdated = EventType(ssf + "stream-updated")

    /// The seven types Google documents, in the order of its table: what `risc stream update`
    /// requests by default.
    public static let google: [EventType] = [
        .sessionsRevoked, .tokensRevoked, .tokenRevoked, .accountDisabled, .accountEnabled,
        .accountCredentialChangeRequired, .verification,
    ]

    /// What an SSF transmitter may deliver and risc understands: CAEP 1.0, RISC 1.0 and SSF's
    /// own (what `risc stream create --transmitter` requests by default).
    public static let ssfSupported: [EventType] = [
        .sessionRevoked, .credentialChange, .tokenClaimsChange, .assuranceLevelChange, .deviceComplianceChange, .riskLevelChange,
        .sessionEstablished, .sessionPresented, .accountCredentialChangeRequired, .accountPurged, .accountDisabled, .accountEnabled,
        .identifierChanged, .identifierRecycled, .credentialCompromise, .optIn, .optOutInitiated, .optOutCancelled, .optOutEffective,
        .recoveryActivated, .recoveryInformationChanged, .sessionsRevoked, .ssfVerification, .streamUpdated,
    ]

    /// Every type risc knows by name.
    public static let known: Set<EventType> = Set(
        google + [
            .accountPurged, .identifierChanged, .identifierRecycled, .credentialCompromise, .optIn, .optOutInitiated,
            .optOutCancelled, .optOutEffective, .recoveryActivated, .recoveryInformationChanged, .sessionRevoked,
            .tokenClaimsChange, .credentialChange, .assuranceLevelChange, .deviceComplianceChange, .sessionEstablished,
            .sessionPresented, .riskLevelChange, .ssfVerification, .streamUpdated,
        ]
    ).union(legacyAliases.keys)

    /// Google's legacy `https://accounts.google.com/risc/event/…` names (spec §1.8, third-party report).
    public static let legacyAliases: [EventType: EventType] = [
        EventType(googleLegacy + "one-token-revoked"): .tokenRevoked,
        EventType(googleLegacy + "all-token-revoked"): .tokensRevoked,
        EventType(googleLegacy + "account-disabled"): .accountDisabled,
        EventType(googleLegacy + "account-enabled"): .accountEnabled,
        EventType(googleLegacy + "sessions-revoked"): .sessionsRevoked,
        EventType(googleLegacy + "account-credential-change-required"): .accountCredentialChangeRequired,
        EventType(googleLegacy + "verification"): .verification,
    ]

    /// Every known type mapped to its canonical type: one hash answers both questions.
    private static let canonicalByType: [EventType: EventType] = {
        var table: [EventType: EventType] = [:]
        for type in known { table[type] = legacyAliases[type] ?? type }
        return table
    }()

    /// The modern type this one stands for: itself, or what a legacy alias maps to.
    public var canonical: EventType { Self.canonicalByType[self] ?? self }

    public var isKnown: Bool { Self.canonicalByType[self] != nil }

    /// The canonical type of a known type, nil for an unknown one.
    var knownCanonical: EventType? { Self.canonicalByType[self] }

    /// The type's short name (`account-disabled`), for logs and the CLI.
    public var shortName: String {
        guard let slash = uri.lastIndex(of: "/") else { return uri }
        return String(uri[uri.index(after: slash)...])
    }

    /// A type from a short name of Google's seven (`sessions-revoked`, …) or a full URI.
    public init?(name: String) {
        if name.contains(":") {
            self.init(name)
            return
        }
        guard let match = (Self.google + Array(Self.known)).first(where: { $0.shortName == name }) else { return nil }
        self = match
    }

    /// Whether an event of this type is about a subject (everything but verification and stream events).
    static func needsSubject(canonical type: EventType) -> Bool {
        type != .verification && type != .ssfVerification && type != .streamUpdated
    }
}
