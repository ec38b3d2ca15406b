import Foundation
import RISCCore
import RISCSQL

/// Applies a plan to the embedded account store, inside the caller's transaction. Idempotent per
/// (SET, event, action): an action already recorded in `applied_actions` is not applied again.
struct EmbeddedActionApplier {
    let connection: SQLiteConnection
    let tokenKey: [UInt8]

    /// - Parameter fresh: the SET was stored in this very transaction, so nothing can have been
    ///   applied for it yet (skips the per-action lookup).
    func apply(_ plan: ActionPlan, setID: Int64, keyIssuer: String, now: Double, fresh: Bool = false) throws -> [ActionOutcome] {
        let accounts = try plan.steps.map { try resolve($0, keyIssuer: keyIssuer) }
        let applied = fresh ? [] : try appliedActions(setID: setID)
        let planned = AccountActions.plan(plan, accounts: accounts) { applied.contains("\($0)/\($1.rawValue)") }
        return try planned.map { planned in
            let result = try planned.result { try execute($0, now: now) }
            if planned.isNew {
                try connection.cached(
                    "INSERT INTO applied_actions (set_id, event_index, action, applied_at, result) VALUES (?1, ?2, ?3, ?4, ?5)"
                ).run([.int(setID), .int(Int64(planned.eventIndex)), .text(planned.action.rawValue), .double(now), .text(result)])
            }
            return planned.outcome(result)
        }
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
                    tokens.append(
                        TokenToRevoke(
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

    /// The (event index, action) pairs applied for `setID` before, as `index/action`.
    private func appliedActions(setID: Int64) throws -> Set<String> {
        let statement = try connection.cached("SELECT event_index, action FROM applied_actions WHERE set_id = ?1")
        try statement.bind([.int(setID)])
        defer { statement.reset() }
        var applied = Set<String>()
        while try statement.step() { applied.insert("\(statement.int(0))/\(statement.text(1) ?? "")") }
        return applied
    }

    /// The account an event is about (`AccountActions.lookups`); nil: not one of ours.
    private func resolve(_ step: ActionPlan.Step, keyIssuer: String) throws -> AccountActions.Account? {
        for lookup in AccountActions.lookups(for: step, keyIssuer: keyIssuer, tokenKey: tokenKey) {
            switch lookup {
            case .token(let column, let value):
                let statement = try connection.cached(
                    """
                    SELECT t.account_id, t.id, t.\(column.rawValue), a.access_changed_at FROM tokens t JOIN accounts a ON a.id = t.account_id
                    WHERE t.\(column.rawValue) = ?1 AND t.revoked_at IS NULL ORDER BY t.id LIMIT 1
                    """)
                try statement.bind([.text(value)])
                defer { statement.reset() }
                if try statement.step(), TokenFingerprint.constantTimeEquals(statement.text(2) ?? "", value) {
                    return .init(id: statement.int(0), tokenID: statement.int(1), accessChangedAt: statement.isNull(3) ? nil : statement.double(3))
                }
            case .subject(let issuer, let subject):
                if let found = try account(where: "issuer = ?1 AND subject = ?2", [.text(issuer), .text(subject)]) { return found }
            case .email(let email):
                if let found = try account(where: "email = ?1", [.text(email)]) { return found }
            }
        }
        return nil
    }

    private func account(where condition: String, _ values: [SQLiteValue]) throws -> AccountActions.Account? {
        let statement = try connection.cached("SELECT id, access_changed_at FROM accounts WHERE \(condition) ORDER BY id LIMIT 1")
        try statement.bind(values)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return .init(id: statement.int(0), accessChangedAt: statement.isNull(1) ? nil : statement.double(1))
    }

    /// Runs one primitive; the rows it changed.
    private func execute(_ primitive: AccountActions.Primitive, now: Double) throws -> Int {
        let (sql, values): (String, [SQLiteValue])
        switch primitive {
        case .endSessions(let account, let createdBy, let googleOnly, let reason, let sessionID):
            sql =
                "UPDATE sessions SET ended_at = ?1, ended_reason = ?2 WHERE account_id = ?3 AND ended_at IS NULL AND created_at <= ?4"
                + (googleOnly ? " AND via_google = 1" : "") + (sessionID == nil ? "" : " AND session_id = ?5")
            values = [.double(now), .text(reason), .int(account), .double(createdBy)] + (sessionID.map { [.text($0)] } ?? [])
        case .revokeTokens(let account, let kind, let reason):
            sql = "UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2 WHERE account_id = ?3 AND kind = ?4 AND revoked_at IS NULL"
            values = [.double(now), .text(reason), .int(account), .text(kind.rawValue)]
        case .revokeToken(let id, let reason):
            // With every active copy an older store may hold of the same token.
            sql = """
                UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2
                WHERE (account_id, kind, hash) = (SELECT account_id, kind, hash FROM tokens WHERE id = ?3) AND revoked_at IS NULL
                """
            values = [.double(now), .text(reason), .int(id)]
        case .setAccess(let account, let flag, let enabled, let eventTime):
            sql = """
                UPDATE accounts SET \(flag.rawValue) = ?1, access_changed_at = max(coalesce(access_changed_at, 0), ?2), updated_at = ?3
                WHERE id = ?4 AND coalesce(access_changed_at, 0) <= ?2
                """
            values = [.int(enabled ? 1 : 0), .double(eventTime), .double(now), .int(account)]
        case .raise(let account, let flag):
            sql = "UPDATE accounts SET \(flag.rawValue) = 1, updated_at = ?1 WHERE id = ?2"
            values = [.double(now), .int(account)]
        }
        try connection.cached(sql).run(values)
        return Int(connection.changes)
    }
}
