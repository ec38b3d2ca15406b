/// The store's schema, versioned with `PRAGMA user_version`.
///
/// `sets` is both the audit record and the work queue: a row is `pending` from the moment it is
/// acknowledged until the action workers (issue 4) finish it; `id` gives arrival order.
enum Schema {
    static let version: Int64 = 1

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
            """
    ]
}
