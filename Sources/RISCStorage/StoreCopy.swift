import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCPostgres
import RISCSQL
import RISCSQLite

extension Storage {
    /// The tables `copy` copies, in an order that respects references, with their columns: those
    /// the shared store has too, under the same names.
    static let copiedTables: [(name: String, columns: [String])] = [
        (
            "accounts",
            [
                "id", "issuer", "subject", "user_id", "email", "google_signin_enabled", "email_recovery_enabled", "flagged_for_review",
                "heightened_monitoring", "access_changed_at", "verification_state", "created_at", "updated_at",
            ]
        ),
        ("sessions", ["id", "account_id", "session_id", "via_google", "created_at", "ended_at", "ended_reason"]),
        ("tokens", ["id", "account_id", "kind", "hash", "hash_of_hex", "prefix_mac", "label", "created_at", "revoked_at", "revoked_reason"]),
        (
            "sets",
            [
                "id", "issuer", "jti", "iss", "iat", "received_at", "last_received_at", "deliveries", "remote", "content_type", "event_types",
                "subjects", "token", "state", "attempts", "next_attempt_at", "last_error", "processed_at", "pruned_at",
            ]
        ),
        ("applied_actions", ["set_id", "event_index", "action", "applied_at", "result"]),
        ("stream_verifications", ["state", "requested_at", "api_base", "matched_at", "set_id", "jti", "kid", "alg", "iss", "aud"]),
    ]

    /// `risc store copy`: copies the embedded store in `directory` (taking its lock) into this
    /// store, an empty PostgreSQL one, table by table with ids kept, then compares counts and
    /// `sample` SETs row by row. `say`: the report, line by line. A refusal (a locked directory,
    /// a target that is not empty, another token key, a mismatch) is a `StoreError` `refused`.
    /// Each call to the target gives up after `seconds` on `clock` (`timeout`): a server that
    /// stopped answering held the copy for ever.
    public func copy(
        embeddedStoreIn directory: String, batch: Int, sample: Int, callsWithin seconds: Double, clock: @escaping @Sendable () -> Double,
        say: (String) -> Void
    ) async throws {
        guard case .shared(let shared) = driver else { throw StoreError(.refused, "the target of a copy is a PostgreSQL store") }
        try SQLiteStore.requireStore(in: directory)
        let lock: DataDirectoryLock
        do { lock = try DataDirectoryLock(directory: directory) } catch { throw StoreError(.refused, "\(error)") }
        defer { lock.release() }
        let journaled = try SQLiteEventStore.journaledNotIndexed(directory: directory)
        guard journaled == 0 else {
            throw StoreError(
                .refused, "\(journaled) acknowledged SETs are in the journal of \(directory), not yet in its store: start risc serve on it once (it indexes them first), stop it, then copy")
        }
        let source = try SQLiteStore.session(directory: directory)
        let target = DeadlineSession(shared.session, seconds: seconds, clock: clock)
        _ = try await withDeadline(seconds, "migrating the store", clock: clock) { try await shared.migrate() }
        let present = try await target.rows("SELECT (SELECT count(*) FROM sets) + (SELECT count(*) FROM accounts) + (SELECT count(*) FROM applied_actions)", [])
        if let count = present.first?[0].int, count > 0 {
            throw StoreError(.refused, "the target store is not empty (\(count) rows in sets, accounts, applied_actions): copy into a new database")
        }
        let keyCheck = "SELECT value FROM meta WHERE name = 'token_key_check'"
        if let check = try await source.rows(keyCheck, []).first?[0].text {
            let recorded = try await target.transaction([
                ("INSERT INTO meta (name, value) VALUES ('token_key_check', $1) ON CONFLICT (name) DO NOTHING", [.text(check)]), (keyCheck, []),
            ])[1]
            guard recorded.allSatisfy({ TokenFingerprint.constantTimeEquals($0[0].text ?? "", check) }) else {
                throw StoreError(.refused, "the target store records another token key than the source's")
            }
        }
        var lines: [String] = []
        for (table, columns) in Self.copiedTables {
            var after: Int64 = 0, copied = 0
            let perInsert = max(1, min(batch, 60_000 / columns.count))
            while true {
                let rows = try await source.rows(
                    "SELECT rowid, \(columns.joined(separator: ", ")) FROM \(table) WHERE rowid > $1 ORDER BY rowid LIMIT $2", [.int(after), .int(Int64(perInsert))])
                guard let last = rows.last?[0].int else { break }
                let tuples = rows.indices.map { row in "(" + columns.indices.map { "$\(row * columns.count + $0 + 1)" }.joined(separator: ", ") + ")" }
                _ = try await target.transaction([
                    ("INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES \(tuples.joined(separator: ", "))", rows.flatMap { $0.dropFirst() })
                ])
                copied += rows.count
                after = last
            }
            let expected = try await source.rows("SELECT count(*) FROM \(table)", [])[0][0].int
            let found = try await target.rows("SELECT count(*) FROM \(table)", [])[0][0].int
            lines.append(
                "\(table.padding(toLength: 22, withPad: " ", startingAt: 0)) \(String(copied).padding(toLength: 10, withPad: " ", startingAt: 0)) \(found == expected ? "ok" : "MISMATCH: source \(expected), target \(found)")"
            )
            guard found == expected else {
                lines.forEach(say)
                throw StoreError(.refused, "\(table): \(expected) rows in the source, \(found) in the target")
            }
        }
        // The id sequences moved past the copied ids.
        for table in ["sets", "accounts", "sessions", "tokens"] {
            _ = try await target.rows("SELECT setval(pg_get_serial_sequence('\(table)', 'id'), coalesce((SELECT max(id) FROM \(table)), 0) + 1, false)", [])
        }
        let top = try await source.rows("SELECT coalesce(max(id), 0) FROM sets", [])[0][0].int
        let ids = top == 0 ? [] : (0..<min(Int64(sample), top)).map { 1 + $0 * top / min(Int64(sample), top) }
        let (mine, theirs) = (try await Self.sample(source, ids: ids), try await Self.sample(target, ids: ids))
        let differing = mine.filter { theirs[$0.key] != $0.value }.count
        say("TABLE                  ROWS       CHECK")
        lines.forEach(say)
        say("sample of \(mine.count) SETs compared row by row: \(differing == 0 ? "identical" : "\(differing) differ")")
        guard differing == 0 else { throw StoreError(.refused, "\(differing) sampled SETs differ between the source and the target") }
        try MovedMarker.write(in: directory, target: "\(shared.database.url)")
        say("marked \(MovedMarker.path(in: directory)): risc serve refuses this data directory as an embedded store from now on")
        say(
            """
            copied into \(shared.database.url). Next: give every receiver accounts.token_key_file = a copy of \
            \((directory as NSString).appendingPathComponent("token-key")) (or your accounts.token_key_file), and store.url = \(shared.database.url)
            """)
    }

    /// These SETs' (jti, state, deliveries, SHA-256 of the token), compared between the two stores.
    private static func sample(_ store: any SQLSession, ids: [Int64]) async throws -> [Int64: String] {
        var result: [Int64: String] = [:]
        for (list, binds) in chunks(ids) {
            for row in try await store.rows("SELECT id, jti, state, deliveries, token FROM sets WHERE id IN (\(list))", binds) {
                result[row[0].int] = "\(row[1].text ?? "") \(row[2].text ?? "") \(row[3].int) \(SHA256.hex(Array((row[4].text ?? "").utf8)))"
            }
        }
        return result
    }
}
