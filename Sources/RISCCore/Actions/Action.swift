/// Something the site does to a linked account in answer to an event (spec §1.8, §8 step 11).
public enum Action: String, Sendable, CaseIterable, Comparable {
    /// End every open session of the account.
    case endSessions = "end_sessions"
    /// End the one session the event's subject names (an SSF complex subject's `session`, CAEP
    /// `session-revoked`); every open session of the account when it names none.
    case endSession = "end_session"
    /// End the sessions that came from Google sign-in.
    case endGoogleSessions = "end_google_sessions"
    /// Delete the Google OAuth tokens the site holds for the account (and ask to re-consent).
    case deleteGoogleTokens = "delete_google_tokens"
    /// Delete the one refresh token named by the event's token identifier.
    case revokeToken = "revoke_token"
    /// Revoke the tokens the site issued to Google through account linking.
    case revokeLinkedTokens = "revoke_linked_tokens"
    case suspendGoogleSignIn = "suspend_google_signin"
    case suspendEmailRecovery = "suspend_email_recovery"
    case restoreGoogleSignIn = "restore_google_signin"
    case restoreEmailRecovery = "restore_email_recovery"
    case flagForReview = "flag_for_review"
    case heightenMonitoring = "heighten_monitoring"
    /// Record a verification event's `state`.
    case recordVerification = "record_verification"
    /// Nothing to do but log it.
    case logOnly = "log_only"
    /// Deliver the event to the site's webhook (`webhook.url`) beside the row's other actions,
    /// which risc applies to its own accounts (`webhook.scope = rows`): a site chooses per event
    /// and per transmitter what its own endpoint hears of.
    case webhook = "webhook"

    public static func < (lhs: Action, rhs: Action) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Actions that change whether the account may sign in with Google or recover by email; they
    /// obey the ordering rule (an older event never undoes a newer one).
    public var changesAccess: Bool {
        switch self {
        case .suspendGoogleSignIn, .suspendEmailRecovery, .restoreGoogleSignIn, .restoreEmailRecovery: true
        default: false
        }
    }
}
