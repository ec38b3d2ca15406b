import Foundation
import RISCCore

/// Applies a plan to the embedded account store, inside the caller's transaction. Idempotent per
/// (SET, event, action): an action already recorded in `applied_actions` is not applied again.
struct EmbeddedActionApplier {
    let connection: SQLiteConnection
    let tokenKey: [UInt8]

    typealias Outcome = ActionOutcome

    /// The outcomes as the event log shows them.
    static func json(_ outcomes: [Outcome]) -> JSONValue { ActionOutcome.json(outcomes) }

    /// - Parameter fresh: the SET was stored in this very transaction, so nothing can have been
    ///   applied for it yet (skips the per-action lookup).
    func apply(_ plan: ActionPlan, setID: Int64, keyIssuer: String, now: Double, fresh: Bool = false) throws -> [Outcome] {
        var outcomes: [Outcome] = []
        for step in plan.steps {
            let account = try resolve(step, keyIssuer: keyIssuer)
            for action in step.actions {
                if !fresh, try alreadyApplied(setID: setID, eventIndex: step.eventIndex, action: action) {
                    outcomes.append(Outcome(action: action, eventIndex: step.eventIndex, result: "already applied"))
                    continue
                }
                let result: String
                if let fixed = ActionOutcome.accountFree(action, step: step) {
                    result = fixed
                } else if let account {
                    result = try perform(action, step: step, account: account, eventTime: plan.eventTime, now: now)
                } else {
                    result = ActionOutcome.unknownSubject
                }
                try connection.cached(
                    "INSERT INTO applied_actions (set_id, event_index, action, applied_at, result) VALUES (?1, ?2, ?3, ?4, ?5)"
                ).run([.int(setID), .int(Int64(step.eventIndex)), .text(action.rawValue), .double(now), .text(result)])
                outcomes.append(Outcome(action: action, eventIndex: step.eventIndex, result: result))
            }
        }
        return outcomes
    }

    /// See `WorkQueue.tokensToRevoke`.
    func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) throws -> [TokenToRevoke] {
        var tokens: [TokenToRevoke] = []
        for step in plan.steps {
            let (linked, matched) = TokenToRevoke.wanted(by: step)
            guard linked || matched, let account = try resolve(step, keyIssuer: keyIssuer) else { continue }
            let reason = step.recordedReason
            func select(_ sql: String, _ values: [SQLiteValue], _ action: Action) throws {
                let statement = try connection.cached(sql)
                try statement.bind(values)
                defer { statement.reset() }
                while try statement.step() {
                    tokens.append(TokenToRevoke(
                        id: statement.int(0), eventIndex: step.eventIndex, action: action,
                        kind: TokenKind(rawValue: statement.text(1) ?? "") ?? .linked, hash: statement.text(2) ?? "", reason: reason))
                }
            }
            if linked {
                try select(
                    "SELECT id, kind, hash FROM tokens WHERE account_id = ?1 AND kind = 'linked' AND revoked_at IS NULL ORDER BY id",
                    [.int(account.id)], .revokeLinkedTokens)
            }
            if matched, let tokenID = account.tokenID {
                try select("SELECT id, kind, hash FROM tokens WHERE id = ?1", [.int(tokenID)], .revokeToken)
            }
        }
        return tokens
    }

    /// Marks `tokens` revoked (those still active), in the caller's transaction.
    func markRevoked(_ tokens: [TokenToRevoke], now: Double) throws {
        let statement = try connection.cached("UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2 WHERE id = ?3 AND revoked_at IS NULL")
        for token in tokens { try statement.run([.double(now), .text(token.reason), .int(token.id)]) }
    }

    private func alreadyApplied(setID: Int64, eventIndex: Int, action: Action) throws -> Bool {
        let statement = try connection.cached(
            "SELECT 1 FROM applied_actions WHERE set_id = ?1 AND event_index = ?2 AND action = ?3")
        try statement.bind([.int(setID), .int(Int64(eventIndex)), .text(action.rawValue)])
        defer { statement.reset() }
        return try statement.step()
    }

    /// The account an event is about: by Google subject; for token-revoked, by the token;
    /// by email as a last resort. nil: not one of ours (a logged no-op, never a failure).
    private func resolve(_ step: ActionPlan.Step, keyIssuer: String) throws -> (id: Int64, tokenID: Int64?, accessChangedAt: Double?)? {
        switch step.subject {
        case .oauthToken(let identifier)?:
            let column: String, value: String
            switch identifier.algorithm {
            case .prefix:
                column = "prefix_mac"
                value = TokenFingerprint.prefixMAC(identifier.token, key: tokenKey)
            case .hashSHA512SHA512:
                guard let hash = TokenFingerprint.normalizedHash(identifier.token) else { return nil }
                column = "hash"
                value = hash
            default:
                return nil
            }
            let statement = try connection.cached("""
                SELECT t.account_id, t.id, t.\(column), a.access_changed_at FROM tokens t JOIN accounts a ON a.id = t.account_id
                WHERE t.\(column) = ?1 AND t.revoked_at IS NULL ORDER BY t.id LIMIT 1
                """)
            try statement.bind([.text(value)])
            defer { statement.reset() }
            guard try statement.step(), TokenFingerprint.constantTimeEquals(statement.text(2) ?? "", value) else { return nil }
            return (statement.int(0), statement.int(1), statement.isNull(3) ? nil : statement.double(3))
        case let subject?:
            if let (issuer, sub) = subject.googleSubject {
                let scope = SETPolicy.issuerScope(issuer ?? keyIssuer)
                if let found = try account(where: "issuer = ?1 AND subject = ?2", [.text(scope), .text(sub)]) { return found }
            }
            if let email = subject.email {
                return try account(where: "email = ?1", [.text(email.lowercased())])
            }
            return nil
        case nil:
            return nil
        }
    }

    private func account(where condition: String, _ values: [SQLiteValue]) throws -> (id: Int64, tokenID: Int64?, accessChangedAt: Double?)? {
        let statement = try connection.cached("SELECT id, access_changed_at FROM accounts WHERE \(condition) LIMIT 1")
        try statement.bind(values)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return (statement.int(0), nil, statement.isNull(1) ? nil : statement.double(1))
    }

    private func perform(
        _ action: Action, step: ActionPlan.Step, account: (id: Int64, tokenID: Int64?, accessChangedAt: Double?),
        eventTime: Double, now: Double
    ) throws -> String {
        let reason = step.recordedReason
        // The ordering rule's cheap early answer from the account as resolved; the UPDATE below
        // checks it again atomically, which is what makes it hold under concurrent writers.
        if action.changesAccess, !OrderingRule.accessChangeApplies(eventTime: eventTime, lastAccessChange: account.accessChangedAt) {
            return OrderingRule.superseded
        }
        func update(_ sql: String, _ values: [SQLiteValue]) throws -> Int {
            try connection.cached(sql).run(values)
            return Int(sqlite3Changes())
        }
        switch action {
        case .endSessions, .endGoogleSessions:
            let google = action == .endGoogleSessions ? " AND via_google = 1" : ""
            let n = try update(
                "UPDATE sessions SET ended_at = ?1, ended_reason = ?2 WHERE account_id = ?3 AND ended_at IS NULL AND created_at <= ?4\(google)",
                // `iat` has whole seconds: a session opened within that second counts as before it.
                [.double(now), .text(reason), .int(account.id), .double(OrderingRule.sessionCutoff(eventTime: eventTime))])
            return "ended \(n) session\(n == 1 ? "" : "s")"
        case .deleteGoogleTokens, .revokeLinkedTokens:
            let kind = action == .deleteGoogleTokens ? "google_refresh" : "linked"
            let n = try update(
                "UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2 WHERE account_id = ?3 AND kind = ?4 AND revoked_at IS NULL",
                [.double(now), .text(reason), .int(account.id), .text(kind)])
            return "revoked \(n) token\(n == 1 ? "" : "s")"
        case .revokeToken:
            guard let tokenID = account.tokenID else { return "no matching token" }
            let n = try update(
                "UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2 WHERE id = ?3 AND revoked_at IS NULL",
                [.double(now), .text(reason), .int(tokenID)])
            return n == 1 ? "revoked the matching token" : "token already revoked"
        case .suspendGoogleSignIn, .restoreGoogleSignIn, .suspendEmailRecovery, .restoreEmailRecovery:
            let column = [.suspendGoogleSignIn, .restoreGoogleSignIn].contains(action) ? "google_signin_enabled" : "email_recovery_enabled"
            let value: Int64 = [.restoreGoogleSignIn, .restoreEmailRecovery].contains(action) ? 1 : 0
            // OrderingRule in one statement: applied only while no newer access change is recorded.
            let changed = try update(
                "UPDATE accounts SET \(column) = ?1, access_changed_at = max(coalesce(access_changed_at, 0), ?2), updated_at = ?3 WHERE id = ?4 AND coalesce(access_changed_at, 0) <= ?2",
                [.int(value), .double(eventTime), .double(now), .int(account.id)])
            return changed == 1 ? "\(column) = \(value == 1)" : OrderingRule.superseded
        case .flagForReview, .heightenMonitoring:
            let column = action == .flagForReview ? "flagged_for_review" : "heightened_monitoring"
            _ = try update("UPDATE accounts SET \(column) = 1, updated_at = ?1 WHERE id = ?2", [.double(now), .int(account.id)])
            return "\(column) = true"
        case .recordVerification, .logOnly:
            return "logged"
        }
    }

    private func sqlite3Changes() -> Int64 { connection.changes }
}
