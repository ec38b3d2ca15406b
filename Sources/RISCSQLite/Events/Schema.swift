import CSQLite
import Foundation
import RISCCore

/// The store's schema, versioned with `PRAGMA user_version`.
///
/// `sets` is both the audit record and the work queue: a row is `pending` from the moment it is
/// acknowledged until the action workers (issue 4) finish it; `id` gives arrival order.
enum Schema {
    static let version: Int64 = 11

    /// What every requeue sets (`risc queue retry`, replay): pending, no attempts, due now, and a
    /// new retry window from now.
    static let requeueAssignments = "state = 'pending', attempts = 0, next_attempt_at = 0, retry_since = (julianday('now') - 2440587.5) * 86400.0"

    static let migrations: [Int64: String] = [
        1: """
        CREATE TABLE sets (
            id INTEGER PRIMARY KEY,
            issuer TEXT NOT NULL,
            jti TEXT NOT NULL,
            iss TEXT NOT NULL,
            iat REAL NOT NULL,
            received_at REAL NOT NULL,
            last_received_at REAL NOT NULL,
            deliveries INTEGER NOT NULL DEFAULT 1,
            remote TEXT,
            content_type TEXT,
            event_types TEXT NOT NULL,
            subjects TEXT NOT NULL,
            token TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'dead')),
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            processed_at REAL,
            UNIQUE (issuer, jti)
        );
        CREATE INDEX sets_queue ON sets (next_attempt_at, id) WHERE state = 'pending';
        """,
        2: """
        CREATE TABLE accounts (
            id INTEGER PRIMARY KEY,
            issuer TEXT NOT NULL,
            subject TEXT NOT NULL,
            user_id TEXT NOT NULL,
            email TEXT,
            google_signin_enabled INTEGER NOT NULL DEFAULT 1,
            email_recovery_enabled INTEGER NOT NULL DEFAULT 1,
            flagged_for_review INTEGER NOT NULL DEFAULT 0,
            heightened_monitoring INTEGER NOT NULL DEFAULT 0,
            access_changed_at REAL,
            verification_state TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (issuer, subject)
        );
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            via_google INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            ended_at REAL,
            ended_reason TEXT,
            UNIQUE (account_id, session_id)
        );
        CREATE TABLE tokens (
            id INTEGER PRIMARY KEY,
            account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('google_refresh', 'linked')),
            hash TEXT NOT NULL,
            prefix_mac TEXT NOT NULL,
            label TEXT,
            created_at REAL NOT NULL,
            revoked_at REAL,
            revoked_reason TEXT
        );
        CREATE INDEX tokens_account ON tokens (account_id, kind);
        CREATE INDEX tokens_hash ON tokens (hash);
        CREATE INDEX tokens_prefix ON tokens (prefix_mac);
        CREATE TABLE applied_actions (
            set_id INTEGER NOT NULL,
            event_index INTEGER NOT NULL,
            action TEXT NOT NULL,
            applied_at REAL NOT NULL,
            result TEXT NOT NULL,
            PRIMARY KEY (set_id, event_index, action)
        );
        """,
        3: """
        CREATE TABLE stream_verifications (
            state TEXT PRIMARY KEY,
            requested_at REAL NOT NULL,
            api_base TEXT,
            matched_at REAL,
            set_id INTEGER,
            jti TEXT,
            kid TEXT,
            alg TEXT,
            iss TEXT,
            aud TEXT
        );
        CREATE INDEX sets_dead ON sets (id) WHERE state = 'dead';
        """,
        5: """
        CREATE TABLE meta (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
        // Retention (RetentionPolicy): when a done SET was stripped of its token and subjects.
        6: """
        ALTER TABLE sets ADD COLUMN pruned_at REAL;
        CREATE INDEX sets_prunable ON sets (processed_at) WHERE state = 'done' AND pruned_at IS NULL;
        CREATE INDEX sets_stripped ON sets (received_at) WHERE pruned_at IS NOT NULL;
        """,
        // The retry window (RetryPolicy.window) runs from here: set when an operator requeues a
        // SET (`risc queue retry`, replay), NULL meaning from its receipt.
        7: """
        ALTER TABLE sets ADD COLUMN retry_since REAL;
        """,
        // The journal (`SETJournal`): the end of the last journaled record the index holds,
        // written in the transaction that stores it.
        8: """
        CREATE TABLE journal_mark (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            segment INTEGER NOT NULL,
            offset INTEGER NOT NULL
        );
        """,
        // The oldest pending SET, which the health sampler asks for every second: without it
        // `min(received_at)` read every pending SET each time (a long webhook outage: all of them).
        9: """
        CREATE INDEX sets_pending_received ON sets (received_at) WHERE state = 'pending';
        """,
        // The double hash with the inner digest as hex (`TokenFingerprint.hashOfHex`), the other
        // reading of a `hash_base64_sha512_sha512` identifier; empty for tokens registered before.
        10: """
        ALTER TABLE tokens ADD COLUMN hash_of_hex TEXT;
        CREATE INDEX tokens_hash_of_hex ON tokens (hash_of_hex) WHERE hash_of_hex IS NOT NULL;
        """,
        // An access-change time past the ordering rule's bound (`OrderingRule.futureAllowance`),
        // written before there was one by an event dated far ahead: brought back to the bound, or
        // every later access change of the account stayed superseded until then.
        11: """
        UPDATE accounts SET access_changed_at = (julianday('now') - 2440587.5) * 86400.0 + \(Int(OrderingRule.futureAllowance))
        WHERE access_changed_at > (julianday('now') - 2440587.5) * 86400.0 + \(Int(OrderingRule.futureAllowance));
        """,
    ]

    /// Migrations done in code rather than one SQL script.
    static let codeMigrations: [Int64: @Sendable (SQLiteConnection) throws(StoreError) -> Void] = [
        4: rewriteStateCheck
    ]

    static let stateCheckWithIn = "CHECK (state IN ('pending', 'done', 'dead'))"
    static let stateCheckWithOr = "CHECK (state = 'pending' OR state = 'done' OR state = 'dead')"

    /// Version 4: `sets.state`'s CHECK as three comparisons instead of an `IN` list, which SQLite
    /// compiled into a temporary table built on every insert and update of a row (2.5 µs of a
    /// 16 µs insert). Same meaning, so every row already satisfies it: SQLite's documented way to
    /// change such a constraint in place (edit the schema text, bump `schema_version`), not a
    /// table rebuild. Runs inside the migration's transaction.
    static func rewriteStateCheck(_ connection: SQLiteConnection) throws(StoreError) {
        let cookie = try connection.scalar("PRAGMA schema_version") ?? 0
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
        try connection.execute("PRAGMA writable_schema = ON")
        do {
            try connection.execute(
                """
                UPDATE sqlite_master SET sql = replace(sql, \(quoted(stateCheckWithIn)), \(quoted(stateCheckWithOr)))
                WHERE type = 'table' AND name = 'sets'
                """)
            try connection.execute("PRAGMA schema_version = \(cookie + 1)")
        } catch {
            try? connection.execute("PRAGMA writable_schema = OFF")
            throw error
        }
        try connection.execute("PRAGMA writable_schema = OFF")
        let statement = try connection.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'sets'")
        defer { statement.reset() }
        guard try statement.step(), let sql = statement.text(0), sql.contains(stateCheckWithOr), !sql.contains(stateCheckWithIn) else {
            throw StoreError(sqlite: SQLITE_ERROR, "schema migration 4: sets.state's CHECK was not rewritten")
        }
    }
}
