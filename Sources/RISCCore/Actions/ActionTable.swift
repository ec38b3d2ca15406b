/// Which actions answer which event, per event type and `reason`. Data, so operators can
/// override any row in the configuration.
///
/// | event (canonical type)               | reason         | actions (default)                                     |
/// |--------------------------------------|----------------|-------------------------------------------------------|
/// | sessions-revoked                     |                | end_sessions                                          |
/// | tokens-revoked                       |                | end_google_sessions, delete_google_tokens             |
/// | token-revoked                        |                | revoke_token                                          |
/// | account-disabled                     | hijacking      | end_sessions, suspend_google_signin,                  |
/// |                                      |                | revoke_linked_tokens                                  |
/// | account-disabled                     | bulk-account   | flag_for_review                                       |
/// | account-disabled                     | (none / other) | suspend_google_signin, suspend_email_recovery         |
/// | account-enabled                      |                | restore_google_signin, restore_email_recovery         |
/// | account-purged (RISC 1.0)            |                | end_google_sessions, delete_google_tokens,            |
/// |                                      |                | revoke_linked_tokens, suspend_google_signin,          |
/// |                                      |                | suspend_email_recovery                                |
/// | account-credential-change-required   |                | heighten_monitoring                                   |
/// | identifier-recycled (RISC 1.0)       |                | suspend_email_recovery                                |
/// | verification                         |                | record_verification                                   |
/// | session-revoked (CAEP)               |                | end_session (the named one, else all)                 |
/// | credential-change (CAEP)             | (any change)   | heighten_monitoring                                   |
/// | device-compliance-change (CAEP)      | not-compliant  | heighten_monitoring                                   |
/// | risk-level-change (CAEP, RISC)       | high           | heighten_monitoring                                   |
/// | anything else                        |                | log_only                                              |
///
/// Legacy `https://accounts.google.com/risc/event/…` aliases use their modern type's rows.
public struct ActionTable: Sendable {
    /// Key: canonical event type URI; inner key: reason ("" for none or any other reason).
    public private(set) var rows: [String: [String: [Action]]]

    public static let `default` = ActionTable(rows: [
        EventType.sessionsRevoked.uri: ["": [.endSessions]],
        EventType.tokensRevoked.uri: ["": [.endGoogleSessions, .deleteGoogleTokens]],
        EventType.tokenRevoked.uri: ["": [.revokeToken]],
        EventType.accountDisabled.uri: [
            // The attacker holds the Google account, and with it the tokens this site issued to
            // Google for it (account linking): revoke them too.
            "hijacking": [.endSessions, .suspendGoogleSignIn, .revokeLinkedTokens],
            "bulk-account": [.flagForReview],
            "": [.suspendGoogleSignIn, .suspendEmailRecovery],
        ],
        EventType.accountEnabled.uri: ["": [.restoreGoogleSignIn, .restoreEmailRecovery]],
        // The Google account is gone for good (RISC 1.0; Google does not document sending it):
        // nothing signed in or linked through it may live on, nor recovery through its address.
        EventType.accountPurged.uri: ["": [.endGoogleSessions, .deleteGoogleTokens, .revokeLinkedTokens, .suspendGoogleSignIn, .suspendEmailRecovery]],
        EventType.accountCredentialChangeRequired.uri: ["": [.heightenMonitoring]],
        // The address now belongs to someone else (RISC 1.0; Google does not document sending it):
        // recovery through it would hand the account to the address's new owner.
        EventType.identifierRecycled.uri: ["": [.suspendEmailRecovery]],
        EventType.verification.uri: ["": [.recordVerification]],
        // CAEP 1.0 (any SSF transmitter): the named session, or all of the user's when none is named.
        EventType.sessionRevoked.uri: ["": [.endSession]],
        // A credential created, changed or removed at the identity provider: watch the account.
        EventType.credentialChange.uri: ["": [.heightenMonitoring]],
        // A device out of compliance, a high risk: watch; ending sessions is a site's choice per transmitter.
        EventType.deviceComplianceChange.uri: ["not-compliant": [.heightenMonitoring]],
        EventType.riskLevelChange.uri: ["high": [.heightenMonitoring]],
    ])

    /// Rows one transmitter overrides (`transmitters.NAME.actions`), by its issuer in scope form
    /// (`SETPolicy.issuerScope`) and each alias. For an event type a transmitter names, its rows
    /// answer: the event's reason, else its default row, else the receiver's rows.
    public private(set) var byIssuer: [String: [String: [String: [Action]]]] = [:]

    /// Each configured issuer alias's issuer, both in scope form: a subject that names its issuer
    /// by an alias is looked up under the issuer, where its accounts are linked (`accountScope`).
    public private(set) var aliasOf: [String: String] = [:]

    public init(rows: [String: [String: [Action]]]) { self.rows = rows }

    /// Records `aliases` as other names of `issuer` (`aliasOf`).
    public mutating func alias(_ aliases: [String], to issuer: String) {
        let scope = SETPolicy.issuerScope(issuer)
        for alias in aliases where SETPolicy.issuerScope(alias) != scope { aliasOf[SETPolicy.issuerScope(alias)] = scope }
    }

    /// The scope a subject's `iss` finds its accounts under: the issuer's for an alias.
    public func accountScope(_ issuer: String) -> String {
        let scope = SETPolicy.issuerScope(issuer)
        return aliasOf[scope] ?? scope
    }

    /// Whether any row, the receiver's or a transmitter's, names the action `webhook`.
    public var namesWebhook: Bool {
        let all = rows.values.flatMap(\.values) + byIssuer.values.flatMap(\.values).flatMap(\.values)
        return all.contains { $0.contains(.webhook) }
    }

    /// Replaces one row: `type` is a short name or URI, `reason` "" for the default row; with
    /// `issuers`, only for SETs those issuers sign.
    public mutating func set(_ type: EventType, reason: String, actions: [Action], issuers: [String] = []) {
        guard !issuers.isEmpty else {
            rows[type.canonical.uri, default: [:]][reason] = actions
            return
        }
        for issuer in issuers { byIssuer[SETPolicy.issuerScope(issuer), default: [:]][type.canonical.uri, default: [:]][reason] = actions }
    }

    /// Takes the rows `other` has for SETs `issuers` sign (one transmitter's, on SIGHUP) in place of these.
    public mutating func takeRows(of issuers: [String], from other: ActionTable) {
        for scope in issuers.map(SETPolicy.issuerScope) { byIssuer[scope] = other.byIssuer[scope] }
    }

    /// The actions for one event of a SET `issuer` signed.
    public func actions(for event: SecurityEvent, issuer: String? = nil) -> [Action] {
        let uri = event.type.canonical.uri, reason = event.reason ?? ""
        if !byIssuer.isEmpty, let issuer, let own = byIssuer[SETPolicy.issuerScope(issuer)]?[uri], let found = own[reason] ?? own[""] {
            return found
        }
        guard let byReason = rows[uri] else { return [.logOnly] }
        return byReason[reason] ?? byReason[""] ?? [.logOnly]
    }
}
