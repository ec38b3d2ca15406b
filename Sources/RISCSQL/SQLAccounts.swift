public import RISCCore

/// The account repository's reads, and its one write that queues nothing, on either driver. Each
/// driver keeps linking (in bulk, its own way) and the unlinks and revocations that queue notices
/// to Google in the same transaction.
public protocol SQLAccounts: AccountRepository {
    var session: any SQLSession { get }
    /// The token-fingerprint key (`TokenKey`).
    var tokenKey: [UInt8] { get }
}

extension SQLAccounts {
    public func add(
        to subject: String, issuer: String? = nil, session sessionID: String? = nil, viaGoogle: Bool = true, token: String? = nil,
        tokenKind: TokenKind = .googleRefresh, now: Double = systemNow()
    ) async throws -> Bool {
        // The first account with `subject` (and the issuer when given: risc normally serves one, Google).
        let account = "SELECT id FROM accounts WHERE (CAST($1 AS TEXT) IS NULL OR issuer = $1) AND subject = $2 ORDER BY id LIMIT 1"
        let key: [SQLValue] = [.optional(issuer.map(SETPolicy.issuerScope)), .text(subject)]
        var statements = [(sql: account, binds: key)]
        if let sessionID {
            statements.append(
                (
                    """
                    INSERT INTO sessions (account_id, session_id, via_google, created_at) SELECT id, $3, $4, $5 FROM (\(account)) AS a WHERE true
                    ON CONFLICT (account_id, session_id) DO NOTHING
                    """, key + [.text(sessionID), .int(viaGoogle ? 1 : 0), .double(now)]
                ))
        }
        if let token {
            // Unless the account holds it active already (a site's call repeated).
            let print = TokenFingerprint(token: token, key: tokenKey)
            statements.append(
                (
                    """
                    INSERT INTO tokens (account_id, kind, hash, hash_of_hex, prefix_mac, created_at) SELECT id, $3, $4, $5, $6, $7 FROM (\(account)) AS a
                    WHERE NOT EXISTS (SELECT 1 FROM tokens t WHERE t.account_id = a.id AND t.kind = $3 AND t.hash = $4 AND t.revoked_at IS NULL)
                    """, key + [.text(tokenKind.rawValue), .text(print.hash), .text(print.hashOfHex), .text(print.prefixMAC), .double(now)]
                ))
        }
        return try await !session.transaction(statements)[0].isEmpty
    }

    /// Whether any account of the site's user `userID` has Google sign-in suspended.
    public func googleSignInSuspended(userID: String) async throws -> Bool {
        try await session.rows("SELECT count(*) FROM accounts WHERE user_id = $1 AND google_signin_enabled = 0", [.text(userID)]).first?[0].int ?? 0 > 0
    }

    public func accounts(subject: String?, after: Int64, limit: Int) async throws -> [AccountSummary] {
        let rows = try await session.rows(
            """
            SELECT a.id, a.issuer, a.subject, a.user_id, a.email, a.google_signin_enabled, a.email_recovery_enabled, a.flagged_for_review,
                a.heightened_monitoring,
                (SELECT count(*) FROM sessions s WHERE s.account_id = a.id AND s.ended_at IS NULL),
                (SELECT count(*) FROM sessions s WHERE s.account_id = a.id AND s.ended_at IS NOT NULL),
                (SELECT count(*) FROM tokens t WHERE t.account_id = a.id AND t.kind = 'google_refresh' AND t.revoked_at IS NULL),
                (SELECT count(*) FROM tokens t WHERE t.account_id = a.id AND t.kind = 'google_refresh' AND t.revoked_at IS NOT NULL),
                (SELECT count(*) FROM tokens t WHERE t.account_id = a.id AND t.kind = 'linked' AND t.revoked_at IS NULL),
                (SELECT count(*) FROM tokens t WHERE t.account_id = a.id AND t.kind = 'linked' AND t.revoked_at IS NOT NULL)
            FROM accounts a WHERE (CAST($1 AS TEXT) IS NULL OR a.subject = $1) AND a.id > $2 ORDER BY a.id LIMIT $3
            """, [.optional(subject), .int(after), .int(Int64(limit))])
        return rows.map { row in
            let count = { Int(row[$0].int) }
            return AccountSummary(
                id: row[0].int, issuer: row[1].text ?? "", subject: row[2].text ?? "", userID: row[3].text ?? "", email: row[4].text,
                googleSignInEnabled: row[5].int != 0, emailRecoveryEnabled: row[6].int != 0, flaggedForReview: row[7].int != 0,
                heightenedMonitoring: row[8].int != 0, openSessions: count(9), endedSessions: count(10),
                googleRefreshTokens: .init(active: count(11), revoked: count(12)), linkedTokens: .init(active: count(13), revoked: count(14)))
        }
    }
}
