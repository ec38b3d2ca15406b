import Foundation
import Logging
import PostgresNIO
public import RISCCore
public import RISCSQL

/// The shared store's `AccountRepository` (the tables `accounts`, `sessions`, `tokens`), with
/// tokens kept only as fingerprints under the one key every receiver shares.
public struct PostgresAccounts: SQLAccounts {
    public let database: PostgresDatabase
    public let tokenKey: [UInt8]
    public var session: any SQLSession { PostgresSession(database: database) }

    public init(database: PostgresDatabase, tokenKey: [UInt8]) {
        self.database = database
        self.tokenKey = tokenKey
    }

    public func link(_ links: [AccountLink], now: Double) async throws -> [Int64] {
        let logger = database.logger
        let tokenKey = self.tokenKey
        return try await database.client.withTransaction(logger: logger) { connection in
            try await Self.insert(links, now: now, tokenKey: tokenKey, connection: connection, logger: logger)
        }
    }

    /// The accounts (one, or `risc accounts import`'s transactions of 20,000) in three statements,
    /// not three round trips an account: the accounts, their sessions, their tokens, each over
    /// arrays. The same account twice is one upsert, as if linked twice in a row (the later user
    /// id, the later email given, the sessions and tokens of both).
    private static func insert(_ links: [AccountLink], now: Double, tokenKey: [UInt8], connection: PostgresConnection, logger: Logger) async throws
        -> [Int64]
    {
        struct Key: Hashable {
            let issuer: String
            let subject: String
        }
        let keys = links.map { Key(issuer: SETPolicy.issuerScope($0.issuer), subject: $0.subject) }
        var order: [Key] = [], merged: [Key: (userID: String, email: String?)] = [:]
        for (key, link) in zip(keys, links) {
            if let earlier = merged[key] {
                merged[key] = (link.userID, link.email?.lowercased() ?? earlier.email)
            } else {
                order.append(key)
                merged[key] = (link.userID, link.email?.lowercased())
            }
        }
        let rows = order.map { merged[$0]! }
        var ids: [Key: Int64] = [:]
        let upserted = try await connection.query(
            """
            INSERT INTO accounts (issuer, subject, user_id, email, created_at, updated_at)
            SELECT i, s, u, CASE WHEN h THEN e END, \(now), \(now)
            FROM unnest(\(order.map(\.issuer))::text[], \(order.map(\.subject))::text[], \(rows.map(\.userID))::text[],
                        \(rows.map { $0.email ?? "" })::text[], \(rows.map { $0.email != nil })::bool[]) WITH ORDINALITY AS t(i, s, u, e, h, n)
            ORDER BY n
            ON CONFLICT (issuer, subject) DO UPDATE SET user_id = excluded.user_id,
                email = coalesce(excluded.email, accounts.email), updated_at = excluded.updated_at
            RETURNING id, issuer, subject
            """, logger: logger)
        for try await (id, issuer, subject) in upserted.decode((Int64, String, String).self) { ids[Key(issuer: issuer, subject: subject)] = id }
        let accountIDs = try keys.map { key in
            guard let id = ids[key] else { throw StoreError(.failed, "account upsert returned no row for \(key.subject)") }
            return id
        }
        var sessions: (accounts: [Int64], ids: [String], starts: [Double]) = ([], [], [])
        var tokens: (accounts: [Int64], kinds: [String], hashes: [String], hexes: [String], prefixes: [String]) = ([], [], [], [], [])
        for (account, link) in zip(accountIDs, links) {
            for session in link.sessions {
                sessions.accounts.append(account)
                sessions.ids.append(session)
                sessions.starts.append(link.start(of: session, now: now))
            }
            for (kind, values) in [(TokenKind.googleRefresh, link.refreshTokens), (.linked, link.linkedTokens)] {
                for print in values.map({ TokenFingerprint(token: $0, key: tokenKey) }) {
                    tokens.accounts.append(account)
                    tokens.kinds.append(kind.rawValue)
                    tokens.hashes.append(print.hash)
                    tokens.hexes.append(print.hashOfHex)
                    tokens.prefixes.append(print.prefixMAC)
                }
            }
        }
        if !sessions.ids.isEmpty {
            try await connection.query(
                """
                INSERT INTO sessions (account_id, session_id, created_at)
                SELECT a, s, c FROM unnest(\(sessions.accounts)::int8[], \(sessions.ids)::text[], \(sessions.starts)::float8[]) AS t(a, s, c)
                ON CONFLICT (account_id, session_id) DO NOTHING
                """, logger: logger)
        }
        if !tokens.hashes.isEmpty {
            try await connection.query(
                """
                INSERT INTO tokens (account_id, kind, hash, hash_of_hex, prefix_mac, created_at)
                SELECT DISTINCT ON (a, k, h) a, k, h, x, p, \(now)
                FROM unnest(\(tokens.accounts)::int8[], \(tokens.kinds)::text[], \(tokens.hashes)::text[], \(tokens.hexes)::text[],
                            \(tokens.prefixes)::text[]) AS t(a, k, h, x, p)
                WHERE NOT EXISTS (SELECT 1 FROM tokens o WHERE o.account_id = t.a AND o.kind = t.k AND o.hash = t.h AND o.revoked_at IS NULL)
                """, logger: logger)
        }
        return accountIDs
    }

    public func unlink(subject: String, issuer: String?, notices: UnlinkNotices?, now: Double) async throws -> (accounts: Int, noticesQueued: Int) {
        let scope = issuer.map(SETPolicy.issuerScope)
        let logger = database.logger
        return try await database.client.withTransaction(logger: logger) { connection in
            var queued = 0
            if let notices {
                var hashes: [String] = []
                for try await hash in try await connection.query(
                    """
                    SELECT t.hash FROM tokens t JOIN accounts a ON a.id = t.account_id
                    WHERE a.subject = \(subject) AND (\(scope)::text IS NULL OR a.issuer = \(scope)) AND t.kind = 'linked' AND t.revoked_at IS NULL
                    ORDER BY t.id FOR UPDATE OF t
                    """, logger: logger
                ).decode(String.self) {
                    hashes.append(hash)
                }
                queued = try await Self.queue(hashes, tokenType: nil, notices: notices, now: now, connection: connection, logger: logger)
            }
            var removed = 0
            for try await _ in try await connection.query(
                """
                DELETE FROM accounts WHERE subject = \(subject) AND (\(scope)::text IS NULL OR issuer = \(scope)) RETURNING id
                """, logger: logger
            ).decode(Int64.self) {
                removed += 1
            }
            return (removed, queued)
        }
    }

    public func revokeLinkedTokens(
        subject: String, issuer: String?, hashes: [String]?, tokenType: String?, reason: String, notices: UnlinkNotices?, now: Double
    ) async throws -> LinkedTokenRevocation? {
        let scope = issuer.map(SETPolicy.issuerScope)
        let logger = database.logger
        return try await database.client.withTransaction(logger: logger) { connection -> LinkedTokenRevocation? in
            var account: Int64?
            for try await id in try await connection.query(
                """
                SELECT id FROM accounts WHERE (\(scope)::text IS NULL OR issuer = \(scope)) AND subject = \(subject) ORDER BY id LIMIT 1 FOR UPDATE
                """, logger: logger
            ).decode(Int64.self) {
                account = id
            }
            guard let account else { return nil }
            var revoked: [String] = []
            for try await hash in try await connection.query(
                """
                UPDATE tokens SET revoked_at = \(now), revoked_reason = \(reason)
                WHERE account_id = \(account) AND kind = 'linked' AND revoked_at IS NULL AND (\(hashes)::text[] IS NULL OR hash = ANY(\(hashes)::text[]))
                RETURNING hash
                """, logger: logger
            ).decode(String.self) {
                revoked.append(hash)
            }
            var queued = 0
            if let notices {
                queued = try await Self.queue(revoked, tokenType: tokenType, notices: notices, now: now, connection: connection, logger: logger)
            }
            let notFound = hashes.map { Set($0).subtracting(revoked).count } ?? 0
            return LinkedTokenRevocation(revoked: revoked.count, noticesQueued: queued, notFound: notFound)
        }
    }

    /// Queues one notice per fingerprint into the SET queue (a repeat is one notice) and wakes the
    /// workers of every receiver at COMMIT. Returns how many were new.
    static func queue(
        _ hashes: [String], tokenType: String?, notices: UnlinkNotices, now: Double, connection: PostgresConnection, logger: Logger
    ) async throws -> Int {
        var queued = 0
        for hash in hashes {
            let notice = try notices.record(tokenHash: hash, tokenType: tokenType, now: now)
            let types = JSONValue.array(notice.eventTypes.map { .string($0) }).serialized
            for try await _ in try await connection.query(
                """
                INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, content_type, event_types, subjects, token)
                VALUES (\(notice.issuer), \(notice.tokenID), \(notice.claimedIssuer), \(notice.issuedAt), \(notice.receivedAt),
                        \(notice.receivedAt), \(QueuedNotice.contentType), \(types), \(notice.subjectsJSON), \(notice.token))
                ON CONFLICT (issuer, jti) DO NOTHING RETURNING id
                """, logger: logger
            ).decode(Int64.self) {
                queued += 1
            }
        }
        if queued > 0 { try await connection.query("SELECT pg_notify(\(PostgresWorkQueue.channel), '')", logger: logger) }
        return queued
    }
}

/// Verification SETs matched to the requests `risc stream verify` recorded (`SQLVerifications`),
/// in the transaction that finishes them.
enum PostgresVerifications {
    /// Verification events matched against the recorded requests inside a finishing transaction:
    /// one event-log line each, `matched` (with the round trip), `unrequested` or `no_state`.
    static func records(
        for plan: ActionPlan, claims: SecurityEventToken, id: Int64, jti: String, compact: String, connection: PostgresConnection,
        logger: Logger, now: Double
    ) async throws -> [EventLogRecord] {
        var records: [EventLogRecord] = []
        for state in plan.verificationStates {
            var requestedAt: Double?
            if let state {
                let header = try? CompactJWS(compact).header
                let audience = claims.audience.joined(separator: " ")
                let matched = try await connection.query(
                    """
                    UPDATE stream_verifications SET matched_at = \(now), set_id = \(id), jti = \(claims.tokenID), kid = \(header?.keyID),
                        alg = \(header?.algorithm.rawValue), iss = \(claims.issuer), aud = \(audience)
                    WHERE state = \(state) AND matched_at IS NULL RETURNING requested_at
                    """, logger: logger)
                for try await requested in matched.decode(Double.self) { requestedAt = requested }
            }
            records.append(ActionPlan.verificationRecord(jti: jti, state: state, requestedAt: requestedAt, now: now))
        }
        return records
    }
}

/// Named leases in the shared store (`LeaseStore`): taken, renewed or passed on in one statement,
/// so two receivers asking at once cannot both hold one.
public struct PostgresLeases: LeaseStore {
    public let database: PostgresDatabase

    public init(database: PostgresDatabase) { self.database = database }

    public func hold(_ name: String, owner: String, for seconds: Double, now: Double) async throws -> Bool {
        let until = now + seconds
        let rows = try await database.client.query(
            """
            INSERT INTO leases (name, owner, expires_at) VALUES (\(name), \(owner), \(until))
            ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
            WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= \(now)
            RETURNING owner
            """, logger: database.logger)
        for try await _ in rows.decode(String.self) { return true }
        return false
    }

    public func release(_ name: String, owner: String) async throws {
        try await database.client.query("DELETE FROM leases WHERE name = \(name) AND owner = \(owner)", logger: database.logger)
    }
}
