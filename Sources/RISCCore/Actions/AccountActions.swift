/// What an action does to a linked account, decided once for every store: a store finds the
/// account (`lookups`), asks which primitive each of the plan's actions is (`plan`), runs each
/// primitive with one statement of its own, and reports `Planned.result`. Adding an action is one
/// change here plus, if it needs a new primitive, one statement per backend.
public enum AccountActions {
    /// An account an event is about, as a store found it.
    public struct Account: Sendable, Equatable {
        public let id: Int64
        /// The token a `token-revoked` event named (found by its fingerprint).
        public let tokenID: Int64?
        /// When an access change was last applied to it (`OrderingRule`).
        public let accessChangedAt: Double?

        public init(id: Int64, tokenID: Int64? = nil, accessChangedAt: Double?) {
            self.id = id
            self.tokenID = tokenID
            self.accessChangedAt = accessChangedAt
        }
    }

    /// One way of finding the account, tried in the order `lookups` gives.
    public enum Lookup: Sendable, Equatable {
        /// An active token whose `column` holds `value` (compare the stored value in constant
        /// time before trusting the match).
        case token(column: TokenColumn, value: String)
        /// By Google subject in the issuer's scope (`SETPolicy.issuerScope`).
        case subject(issuer: String, subject: String)
        /// By lower-cased email, the first account (by id): a last resort.
        case email(String)
    }

    /// Where a token's fingerprint is kept.
    public enum TokenColumn: String, Sendable {
        case prefixMAC = "prefix_mac"
        case hash
        /// The double hash with the inner digest as hex (`TokenFingerprint.hashOfHex`); empty for
        /// tokens registered before schema 10 (embedded) or 7 (PostgreSQL).
        case hashOfHex = "hash_of_hex"
    }

    /// The account flags an access change sets.
    public enum AccessFlag: String, Sendable {
        case googleSignIn = "google_signin_enabled"
        case emailRecovery = "email_recovery_enabled"
    }

    /// The flags for people to look at.
    public enum ReviewFlag: String, Sendable {
        case flaggedForReview = "flagged_for_review"
        case heightenedMonitoring = "heightened_monitoring"
    }

    /// What a store does to an account, in its own transaction; each returns the rows it changed.
    public enum Primitive: Sendable, Equatable {
        /// End the open sessions created at or before `createdBy` (only Google sign-in ones with
        /// `googleOnly`; only the one whose id is `sessionID` when given).
        case endSessions(account: Int64, createdBy: Double, googleOnly: Bool, reason: String, sessionID: String? = nil)
        /// Revoke the account's active tokens of `kind`.
        case revokeTokens(account: Int64, kind: TokenKind, reason: String)
        /// Revoke one token, if still active.
        case revokeToken(id: Int64, reason: String)
        /// Set `flag` to `enabled` and the access-change time to at least `eventTime`, only while
        /// no newer access change is recorded (`OrderingRule`, atomically in the statement).
        case setAccess(account: Int64, flag: AccessFlag, enabled: Bool, eventTime: Double)
        case raise(account: Int64, flag: ReviewFlag)
    }

    /// One action of a plan, decided: its result already known, or a primitive to run.
    public struct Planned: Sendable {
        public let action: Action
        public let eventIndex: Int
        public let work: Work
        /// Recorded in `applied_actions` once done (false: it was applied before).
        public var isNew: Bool {
            if case .alreadyApplied = work { return false }
            return true
        }

        public enum Work: Sendable {
            case alreadyApplied
            case result(String)
            case primitive(Primitive)
        }

        /// The result, running the primitive (if any) with `execute`.
        public func result(executing execute: (Primitive) throws -> Int) rethrows -> String {
            switch work {
            case .alreadyApplied: "already applied"
            case .result(let result): result
            case .primitive(let primitive): AccountActions.result(of: primitive, changed: try execute(primitive))
            }
        }

        /// The same with a store that answers asynchronously.
        public func result(executing execute: (Primitive) async throws -> Int) async rethrows -> String {
            switch work {
            case .alreadyApplied: "already applied"
            case .result(let result): result
            case .primitive(let primitive): AccountActions.result(of: primitive, changed: try await execute(primitive))
            }
        }

        public func outcome(_ result: String) -> ActionOutcome { ActionOutcome(action: action, eventIndex: eventIndex, result: result) }
    }

    /// How to find the account `step` is about: by the token for `token-revoked`; else by Google
    /// subject, then by email. Empty: the event names nobody risc can look up.
    public static func lookups(for step: ActionPlan.Step, keyIssuer: String, tokenKey: [UInt8]) -> [Lookup] {
        switch step.subject {
        case .oauthToken(let identifier)?:
            switch identifier.algorithm {
            case .prefix: return [.token(column: .prefixMAC, value: TokenFingerprint.prefixMAC(identifier.token, key: tokenKey))]
            case .hashSHA512SHA512:
                // Either reading of the identifier (spec §9 question 5): the raw inner digest first.
                return TokenFingerprint.normalizedHash(identifier.token).map { [.token(column: .hash, value: $0), .token(column: .hashOfHex, value: $0)] } ?? []
            default: return []
            }
        case let subject?:
            var lookups: [Lookup] = []
            if let (_, sub) = subject.googleSubject { lookups.append(.subject(issuer: step.accountScope(keyIssuer: keyIssuer), subject: sub)) }
            if let email = subject.email { lookups.append(.email(email.lowercased())) }
            return lookups
        case nil:
            return []
        }
    }

    /// Each of `plan`'s actions, decided: `accounts` holds the account of each step (nil: not one
    /// of ours, a logged no-op, never a failure); `alreadyApplied` says whether (event index,
    /// action) was applied for this SET before.
    public static func plan(_ plan: ActionPlan, accounts: [Account?], alreadyApplied: (Int, Action) -> Bool) -> [Planned] {
        zip(plan.steps, accounts).flatMap { step, account in
            step.actions.map { action in
                let work: Planned.Work
                if alreadyApplied(step.eventIndex, action) {
                    work = .alreadyApplied
                } else if let fixed = ActionOutcome.accountFree(action, step: step) {
                    work = .result(fixed)
                } else if let account {
                    work = decide(action, step: step, account: account, eventTime: plan.eventTime)
                } else {
                    work = .result(ActionOutcome.unknownSubject)
                }
                return Planned(action: action, eventIndex: step.eventIndex, work: work)
            }
        }
    }

    /// The primitive an action on a known account is, or its result when there is nothing to run.
    static func decide(_ action: Action, step: ActionPlan.Step, account: Account, eventTime: Double) -> Planned.Work {
        let reason = step.recordedReason
        // The ordering rule's cheap early answer from the account as found; the primitive checks
        // it again atomically, which is what makes it hold under concurrent writers.
        if action.changesAccess, !OrderingRule.accessChangeApplies(eventTime: eventTime, lastAccessChange: account.accessChangedAt) {
            return .result(OrderingRule.superseded)
        }
        switch action {
        case .endSessions, .endGoogleSessions:
            return .primitive(
                .endSessions(
                    account: account.id, createdBy: OrderingRule.sessionCutoff(eventTime: eventTime), googleOnly: action == .endGoogleSessions,
                    reason: reason))
        case .endSession:
            let cutoff = OrderingRule.sessionCutoff(eventTime: eventTime)
            guard let named = step.subject?.member("session") else {
                return .primitive(.endSessions(account: account.id, createdBy: cutoff, googleOnly: false, reason: reason))
            }
            // A session risc cannot place ends nothing: never every session in its stead.
            guard let id = named.sessionID else { return .result(ActionOutcome.sessionUnplaced) }
            // Keycloak's "every session" (reported): the id `ALL`.
            return .primitive(.endSessions(account: account.id, createdBy: cutoff, googleOnly: false, reason: reason, sessionID: id == "ALL" ? nil : id))
        case .deleteGoogleTokens: return .primitive(.revokeTokens(account: account.id, kind: .googleRefresh, reason: reason))
        case .revokeLinkedTokens: return .primitive(.revokeTokens(account: account.id, kind: .linked, reason: reason))
        case .revokeToken:
            guard let tokenID = account.tokenID else { return .result("no matching token") }
            return .primitive(.revokeToken(id: tokenID, reason: reason))
        case .suspendGoogleSignIn, .restoreGoogleSignIn, .suspendEmailRecovery, .restoreEmailRecovery:
            let flag: AccessFlag = [.suspendGoogleSignIn, .restoreGoogleSignIn].contains(action) ? .googleSignIn : .emailRecovery
            let enabled = [.restoreGoogleSignIn, .restoreEmailRecovery].contains(action)
            return .primitive(.setAccess(account: account.id, flag: flag, enabled: enabled, eventTime: eventTime))
        case .flagForReview: return .primitive(.raise(account: account.id, flag: .flaggedForReview))
        case .heightenMonitoring: return .primitive(.raise(account: account.id, flag: .heightenedMonitoring))
        case .recordVerification, .logOnly, .webhook: return .result("logged")
        }
    }

    /// What the event log says of a primitive that changed `changed` rows.
    public static func result(of primitive: Primitive, changed: Int) -> String {
        switch primitive {
        case .endSessions(_, _, _, _, _?): changed == 1 ? "ended the named session" : ActionOutcome.sessionNotOpen
        case .endSessions: "ended \(changed) session\(changed == 1 ? "" : "s")"
        case .revokeTokens: "revoked \(changed) token\(changed == 1 ? "" : "s")"
        case .revokeToken: changed == 1 ? "revoked the matching token" : "token already revoked"
        case .setAccess(_, let flag, let enabled, _): changed == 1 ? "\(flag.rawValue) = \(enabled)" : OrderingRule.superseded
        case .raise(_, let flag): "\(flag.rawValue) = true"
        }
    }
}
