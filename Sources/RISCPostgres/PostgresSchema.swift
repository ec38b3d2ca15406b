import RISCCore

/// The PostgreSQL store's schema, one list of statements per version.
public enum PostgresSchema {
    public static let version = 8
    /// What every requeue sets (`risc queue retry`, replay): pending, no attempts, due now, no
    /// lease, and a new retry window from now.
    static let requeueAssignments =
        "state = 'pending', attempts = 0, next_attempt_at = 0, retry_since = extract(epoch from clock_timestamp()), lease_owner = NULL, lease_expires_at = NULL"
    /// `pg_advisory_xact_lock` key for migrations ("risc" in ASCII).
    static let advisoryLock: Int64 = 0x7269_7363

    static let migrations: [Int: [String]] = [
        1: [
            """
            CREATE TABLE sets (
                id BIGSERIAL PRIMARY KEY,
                issuer TEXT NOT NULL,
                jti TEXT NOT NULL,
                iss TEXT NOT NULL,
                iat DOUBLE PRECISION NOT NULL,
                received_at DOUBLE PRECISION NOT NULL,
                last_received_at DOUBLE PRECISION NOT NULL,
                deliveries INTEGER NOT NULL DEFAULT 1,
                remote TEXT,
                content_type TEXT,
                event_types TEXT NOT NULL,
                subjects TEXT NOT NULL,
                token TEXT NOT NULL,
                state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'dead')),
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at DOUBLE PRECISION NOT NULL DEFAULT 0,
                last_error TEXT,
                processed_at DOUBLE PRECISION,
                pruned_at DOUBLE PRECISION,
                lease_owner TEXT,
                lease_expires_at DOUBLE PRECISION,
                UNIQUE (issuer, jti)
            )
            """,
            "CREATE INDEX sets_queue ON sets (next_attempt_at, id) WHERE state = 'pending'",
            "CREATE INDEX sets_dead ON sets (id) WHERE state = 'dead'",
            "CREATE INDEX sets_prunable ON sets (processed_at) WHERE state = 'done' AND pruned_at IS NULL",
            "CREATE INDEX sets_stripped ON sets (received_at) WHERE pruned_at IS NOT NULL",
            """
            CREATE TABLE applied_actions (
                set_id BIGINT NOT NULL,
                event_index INTEGER NOT NULL,
                action TEXT NOT NULL,
                applied_at DOUBLE PRECISION NOT NULL,
                result TEXT NOT NULL,
                PRIMARY KEY (set_id, event_index, action)
            )
            """,
            "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ],
        // The account store, the verification ledger and the lease index. Flags are INTEGER 0/1
        // as in the embedded store, so queries such as `flagged_for_review = 1` carry over.
        2: [
            """
            CREATE TABLE accounts (
                id BIGSERIAL PRIMARY KEY,
                issuer TEXT NOT NULL,
                subject TEXT NOT NULL,
                user_id TEXT NOT NULL,
                email TEXT,
                google_signin_enabled INTEGER NOT NULL DEFAULT 1,
                email_recovery_enabled INTEGER NOT NULL DEFAULT 1,
                flagged_for_review INTEGER NOT NULL DEFAULT 0,
                heightened_monitoring INTEGER NOT NULL DEFAULT 0,
                access_changed_at DOUBLE PRECISION,
                verification_state TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                UNIQUE (issuer, subject)
            )
            """,
            "CREATE INDEX accounts_email ON accounts (email)",
            """
            CREATE TABLE sessions (
                id BIGSERIAL PRIMARY KEY,
                account_id BIGINT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                session_id TEXT NOT NULL,
                via_google INTEGER NOT NULL DEFAULT 1,
                created_at DOUBLE PRECISION NOT NULL,
                ended_at DOUBLE PRECISION,
                ended_reason TEXT,
                UNIQUE (account_id, session_id)
            )
            """,
            """
            CREATE TABLE tokens (
                id BIGSERIAL PRIMARY KEY,
                account_id BIGINT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                kind TEXT NOT NULL CHECK (kind IN ('google_refresh', 'linked')),
                hash TEXT NOT NULL,
                prefix_mac TEXT NOT NULL,
                label TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                revoked_at DOUBLE PRECISION,
                revoked_reason TEXT
            )
            """,
            "CREATE INDEX tokens_account ON tokens (account_id, kind)",
            "CREATE INDEX tokens_hash ON tokens (hash)",
            "CREATE INDEX tokens_prefix ON tokens (prefix_mac)",
            """
            CREATE TABLE stream_verifications (
                state TEXT PRIMARY KEY,
                requested_at DOUBLE PRECISION NOT NULL,
                api_base TEXT,
                matched_at DOUBLE PRECISION,
                set_id BIGINT,
                jti TEXT,
                kid TEXT,
                alg TEXT,
                iss TEXT,
                aud TEXT
            )
            """,
            "CREATE INDEX sets_leases ON sets (lease_expires_at) WHERE state = 'pending' AND lease_expires_at IS NOT NULL",
        ],
        // The retry window runs from retry_since when an operator requeued the SET, else from its receipt.
        3: ["ALTER TABLE sets ADD COLUMN retry_since DOUBLE PRECISION"],
        // Named leases: one receiver polls an SSF stream at a time (`PostgresLeases`).
        4: ["CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)"],
        // When the newest SET arrived, for `/readyz` and `/metrics` every second on every
        // receiver: without it `max(last_received_at)` read the whole table each time. Built in
        // the migration's transaction: other receivers' writes wait for it (seconds for millions
        // of SETs).
        5: ["CREATE INDEX sets_last_received ON sets (last_received_at)"],
        // The oldest pending SET, which every receiver's health sampler asks for every second:
        // without it `min(received_at)` read every pending SET each time (a long webhook outage:
        // all of them). Built like 5, over the pending SETs only.
        6: ["CREATE INDEX sets_pending_received ON sets (received_at) WHERE state = 'pending'"],
        // The double hash with the inner digest as hex (`TokenFingerprint.hashOfHex`), the other
        // reading of a `hash_base64_sha512_sha512` identifier; empty for tokens registered before.
        7: [
            "ALTER TABLE tokens ADD COLUMN hash_of_hex TEXT",
            "CREATE INDEX tokens_hash_of_hex ON tokens (hash_of_hex) WHERE hash_of_hex IS NOT NULL",
        ],
        // An access-change time past the ordering rule's bound, written before there was one: as
        // the embedded store's version 11.
        8: [
            """
            UPDATE accounts SET access_changed_at = extract(epoch from clock_timestamp()) + \(Int(OrderingRule.futureAllowance))
            WHERE access_changed_at > extract(epoch from clock_timestamp()) + \(Int(OrderingRule.futureAllowance))
            """
        ],
    ]
}
