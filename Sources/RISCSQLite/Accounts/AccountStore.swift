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
}
