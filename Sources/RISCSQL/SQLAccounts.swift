public import RISCCore

/// The account repository on either driver, but for linking, which each does in bulk its own
/// way. Unlinks and revocations queue their notices to Google in the transaction that makes them.
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
        let (account, key) = Self.account(subject, issuer)
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

    /// The accounts with `subject` (and the issuer when given: risc normally serves one, Google),
    /// over $1 and $2 (`key`).
    private static var matching: String { "(CAST($1 AS TEXT) IS NULL OR issuer = $1) AND subject = $2" }
    private static func key(_ subject: String, _ issuer: String?) -> [SQLValue] { [.optional(issuer.map(SETPolicy.issuerScope)), .text(subject)] }

    /// The first of them.
    private static func account(_ subject: String, _ issuer: String?) -> SQLStatement {
        ("SELECT id FROM accounts WHERE \(matching) ORDER BY id LIMIT 1", key(subject, issuer))
    }

    /// See `AccountRepository.unlink` (sessions and tokens go by `ON DELETE CASCADE`).
    public func unlink(subject: String, issuer: String?, notices: UnlinkNotices?, now: Double) async throws -> (accounts: Int, noticesQueued: Int) {
        let key = Self.key(subject, issuer)
        let tokens = """
            SELECT t.hash FROM tokens t JOIN accounts a ON a.id = t.account_id
            WHERE \(Self.matching) AND t.kind = 'linked' AND t.revoked_at IS NULL ORDER BY t.id\(session.lockRows)
            """
        let rows = try await session.transaction(
            steps: [{ _ in notices == nil ? [] : [(tokens, key)] }] + queue(hashesIn: 0, tokenType: nil, notices: notices, now: now) + [
                { _ in [("DELETE FROM accounts WHERE \(Self.matching) RETURNING id", key)] }
            ])
        return (rows[3].count, rows[1].count)
    }

    /// See `AccountRepository.revokeLinkedTokens` (`risc linking revoke`, the admin API).
    public func revokeLinkedTokens(
        subject: String, issuer: String?, hashes: [String]?, tokenType: String?, reason: String, notices: UnlinkNotices?, now: Double
    ) async throws -> LinkedTokenRevocation? {
        let (account, key) = Self.account(subject, issuer)
        let revoke: SQLStep = { before in
            guard let id = before[0].first?[0].int else { return [] }
            let update = "UPDATE tokens SET revoked_at = $1, revoked_reason = $2 WHERE account_id = $3 AND kind = 'linked' AND revoked_at IS NULL"
            let values: [SQLValue] = [.double(now), .text(reason), .int(id)]
            guard let hashes else { return [(update + " RETURNING hash", values)] }
            return chunks(hashes.map { .text($0) }, from: 4).map { (update + " AND hash IN (\($0.list)) RETURNING hash", values + $0.binds) }
        }
        let rows = try await session.transaction(
            steps: [{ _ in [(account + session.lockRows, key)] }, revoke] + queue(hashesIn: 1, tokenType: tokenType, notices: notices, now: now))
        guard !rows[0].isEmpty else { return nil }
        let revoked = rows[1].map { $0[0].text ?? "" }
        return LinkedTokenRevocation(revoked: revoked.count, noticesQueued: rows[2].count, notFound: hashes.map { Set($0).subtracting(revoked).count } ?? 0)
    }

    /// Two steps: one notice queued per fingerprint in the rows of step `step` (a repeat is one
    /// notice: its `jti` comes from the fingerprint; the step's rows are the new ones), then the
    /// other receivers' workers woken at COMMIT if any was new.
    private func queue(hashesIn step: Int, tokenType: String?, notices: UnlinkNotices?, now: Double) -> [SQLStep] {
        let wake = session.wakeWorkers
        return [
            { before in
                guard let notices else { return [] }
                return try before[step].map { row in
                    let notice = try notices.record(tokenHash: row[0].text ?? "", tokenType: tokenType, now: now)
                    return (
                        """
                        INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, content_type, event_types, subjects, token)
                        VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9) ON CONFLICT (issuer, jti) DO NOTHING RETURNING id
                        """,
                        [
                            .text(notice.issuer), .text(notice.tokenID), .text(notice.claimedIssuer), .double(notice.issuedAt), .double(notice.receivedAt),
                            .text(QueuedNotice.contentType), .text(JSONValue.array(notice.eventTypes.map { .string($0) }).serialized),
                            .text(notice.subjectsJSON), .text(notice.token),
                        ]
                    )
                }
            },
            { before in before[before.count - 1].isEmpty ? [] : wake.map { [($0, [])] } ?? [] },
        ]
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
