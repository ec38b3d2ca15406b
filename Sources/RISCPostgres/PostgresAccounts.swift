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
