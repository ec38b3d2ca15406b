import Foundation
public import RISCCore
import RISCLocal
public import RISCSQL

/// The embedded linked-account store: Google accounts (issuer + `sub`) → the site's user, with
/// their sessions, the Google refresh tokens the site holds and the tokens it issued to Google
/// through account linking. Tokens are kept only as `TokenFingerprint`s. Its blocking SQLite calls
/// run on `BlockingPool.storage`'s threads, not the cooperative pool.
public final class AccountStore: SQLAccounts, @unchecked Sendable {  // reason: `connection` is used in `sqlite.run` only, under its lock
    private let sqlite: SQLiteSession
    private var connection: SQLiteConnection { sqlite.connection }
    public var session: any SQLSession { sqlite }
    /// The HMAC key for token prefixes (`TokenKey`): `DATA_DIR/token-key` or `accounts.token_key_file`.
    public let tokenKey: [UInt8]

    public convenience init(directory: String, tokenKeyFile: String? = nil) throws {
        try PrivateFiles.makeDirectory(directory)
        try self.init(directory: directory, tokenKey: try Self.loadKey(directory: directory, file: tokenKeyFile))
    }

    /// Opens the store with a token key already loaded and checked (`SQLiteStore.tokenKey`).
    init(directory: String, tokenKey: [UInt8]) throws {
        sqlite = try SQLiteSession(SQLiteDatabase(directory: directory), .transactions)
        self.tokenKey = tokenKey
    }

    /// The token key for the store in `directory` (see `TokenKey`), checked against the store.
    static func loadKey(directory: String, file: String? = nil) throws -> [UInt8] {
        let connection = try SQLiteDatabase(directory: directory).connect(.plain)
        return try TokenKey.load(
            path: file ?? (directory as NSString).appendingPathComponent("token-key"), dataDirectoryFile: file == nil,
            recorded: try tokenKeyCheck(connection)
        ) { check in
            try connection.prepare("INSERT OR IGNORE INTO meta (name, value) VALUES ('token_key_check', ?1)").run([.text(check)])
            return try tokenKeyCheck(connection)
        }
    }

    /// The check value of the key the store's fingerprints were made with (`TokenKey`), if recorded.
    static func tokenKeyCheck(_ connection: SQLiteConnection) throws -> String? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE name = 'token_key_check'")
        defer { statement.reset() }
        return try statement.step() ? statement.text(0) : nil
    }

    /// See `AccountRepository.link`: every account in one transaction, all or none.
    public func link(_ links: [AccountLink], now: Double = systemNow()) async throws -> [Int64] {
        try await sqlite.run(write: true) { [self] _ in try links.map { try insert($0, now: now) } }
    }

    private func insert(_ link: AccountLink, now: Double) throws -> Int64 {
        let upsert = try connection.cached(
            """
            INSERT INTO accounts (issuer, subject, user_id, email, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
            ON CONFLICT (issuer, subject) DO UPDATE SET user_id = excluded.user_id,
                email = coalesce(excluded.email, email), updated_at = excluded.updated_at
            RETURNING id
            """)
        try upsert.bind([
            .text(SETPolicy.issuerScope(link.issuer)), .text(link.subject), .text(link.userID),
            .optional(link.email?.lowercased()), .double(now),
        ])
        guard try upsert.step() else { throw StoreError(sqlite: 1, "account upsert returned no row") }
        let id = upsert.int(0)
        upsert.reset()
        let session = try connection.cached(
            "INSERT OR IGNORE INTO sessions (account_id, session_id, created_at) VALUES (?1, ?2, ?3)")
        for sessionID in link.sessions { try session.run([.int(id), .text(sessionID), .double(link.start(of: sessionID, now: now))]) }
        for (kind, values) in [(TokenKind.googleRefresh, link.refreshTokens), (.linked, link.linkedTokens)] {
            for value in values { try insertToken(account: id, kind: kind, TokenFingerprint(token: value, key: tokenKey), now: now) }
        }
        return id
    }

    /// Adds the token unless the account holds it active already (a site's call repeated).
    private func insertToken(account: Int64, kind: TokenKind, _ fingerprint: TokenFingerprint, now: Double) throws {
        try connection.cached(
            """
            INSERT INTO tokens (account_id, kind, hash, hash_of_hex, prefix_mac, created_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6
            WHERE NOT EXISTS (SELECT 1 FROM tokens WHERE account_id = ?1 AND kind = ?2 AND hash = ?3 AND revoked_at IS NULL)
            """
        ).run([
            .int(account), .text(kind.rawValue), .text(fingerprint.hash), .text(fingerprint.hashOfHex), .text(fingerprint.prefixMAC), .double(now),
        ])
    }

    /// See `AccountRepository.unlink` (sessions and tokens go by `ON DELETE CASCADE`).
    public func unlink(subject: String, issuer: String?, notices: UnlinkNotices?, now: Double) async throws -> (accounts: Int, noticesQueued: Int) {
        try await sqlite.run(write: true) { [self] connection in
            let scope = issuer.map(SETPolicy.issuerScope)
            var queued = 0
            if let notices {
                let hashes = try linkedTokens(
                    "SELECT t.id, t.hash FROM tokens t JOIN accounts a ON a.id = t.account_id WHERE a.subject = ?1 AND (?2 IS NULL OR a.issuer = ?2) AND t.kind = 'linked' AND t.revoked_at IS NULL",
                    [.text(subject), .optional(scope)])
                queued = try queue(hashes.map(\.hash), tokenType: nil, notices: notices, now: now)
            }
            try connection.cached("DELETE FROM accounts WHERE subject = ?1 AND (?2 IS NULL OR issuer = ?2)").run([.text(subject), .optional(scope)])
            return (Int(connection.changes), queued)
        }
    }

    /// See `AccountRepository.revokeLinkedTokens` (`risc linking revoke`, the admin API).
    public func revokeLinkedTokens(
        subject: String, issuer: String?, hashes: [String]?, tokenType: String?, reason: String, notices: UnlinkNotices?, now: Double
    ) async throws -> LinkedTokenRevocation? {
        try await sqlite.run(write: true) { [self] connection -> LinkedTokenRevocation? in
            guard let account = try accountID(subject: subject, issuer: issuer) else { return nil }
            var tokens = try linkedTokens(
                "SELECT id, hash FROM tokens WHERE account_id = ?1 AND kind = 'linked' AND revoked_at IS NULL ORDER BY id", [.int(account)])
            var notFound = 0
            if let hashes {
                let wanted = Set(hashes)
                tokens = tokens.filter { wanted.contains($0.hash) }
                notFound = wanted.subtracting(tokens.map(\.hash)).count
            }
            let revoke = try connection.cached("UPDATE tokens SET revoked_at = ?1, revoked_reason = ?2 WHERE id = ?3 AND revoked_at IS NULL")
            for token in tokens { try revoke.run([.double(now), .text(reason), .int(token.id)]) }
            let queued = try notices.map { try queue(tokens.map(\.hash), tokenType: tokenType, notices: $0, now: now) } ?? 0
            return LinkedTokenRevocation(revoked: tokens.count, noticesQueued: queued, notFound: notFound)
        }
    }

    /// The first account with `subject` (and `issuer` when given). Without an issuer, the subject
    /// alone: risc normally serves one issuer, Google.
    private func accountID(subject: String, issuer: String?) throws -> Int64? {
        let find = try connection.cached("SELECT id FROM accounts WHERE (?1 IS NULL OR issuer = ?1) AND subject = ?2 ORDER BY id LIMIT 1")
        defer { find.reset() }
        try find.bind([.optional(issuer.map(SETPolicy.issuerScope)), .text(subject)])
        return try find.step() ? find.int(0) : nil
    }

    private func linkedTokens(_ sql: String, _ values: [SQLiteValue]) throws -> [(id: Int64, hash: String)] {
        let select = try connection.cached(sql)
        try select.bind(values)
        var tokens: [(id: Int64, hash: String)] = []
        while try select.step() { tokens.append((select.int(0), select.text(1) ?? "")) }
        select.reset()
        return tokens
    }

    /// Queues one notice per fingerprint into the SET queue (a repeat is one notice). Returns how
    /// many were new.
    private func queue(_ hashes: [String], tokenType: String?, notices: UnlinkNotices, now: Double) throws -> Int {
        var queued = 0
        for hash in hashes {
            try SQLiteEventStore.insert(try notices.record(tokenHash: hash, tokenType: tokenType, now: now), connection: connection)
            queued += Int(connection.changes)
        }
        return queued
    }
}
