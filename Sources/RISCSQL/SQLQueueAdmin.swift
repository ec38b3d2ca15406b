public import RISCCore

/// The queue's administration (`risc queue`, `risc replay`, the drills) on either driver: the same
/// statements on the embedded store and the shared one.
public struct SQLQueueAdmin: QueueAdministration {
    let session: any SQLSession

    public init(session: any SQLSession) { self.session = session }

    public func counts(now: Double) async throws -> QueueCounts {
        let groups = try await session.rows("SELECT state, attempts > 0, count(*), min(received_at) FROM sets GROUP BY state, attempts > 0", [])
        var counts = QueueCounts(groups: groups.map { ($0[0].text ?? "", $0[1].int != 0, Int($0[2].int), $0[3].double) }, now: now)
        // Each reads pending rows or the dead-letter index, not the table.
        counts.lastRetryError = try await failure(
            "state = 'pending' AND attempts > 0 AND last_error IS NOT NULL ORDER BY next_attempt_at DESC")
        counts.lastDeadError = try await failure("state = 'dead' ORDER BY id DESC")
        return counts
    }

    private func failure(_ condition: String) async throws -> (jti: String, error: String)? {
        try await session.rows("SELECT jti, last_error FROM sets WHERE \(condition) LIMIT 1", []).first.map { ($0[0].text ?? "", $0[1].text ?? "") }
    }

    /// `SELECT`s `QueueRow`s from `sets`, then `rest`.
    private func rows(_ rest: String, _ binds: [SQLValue]) async throws -> [QueueRow] {
        let sql = "SELECT id, jti, iss, state, attempts, deliveries, event_types, received_at, next_attempt_at, last_error FROM sets "
        return try await session.rows(sql + rest, binds).map {
            QueueRow(
                id: $0[0].int, jti: $0[1].text ?? "", issuer: $0[2].text ?? "", stateText: $0[3].text ?? "", attempts: Int($0[4].int),
                deliveries: Int($0[5].int), eventTypesJSON: $0[6].text ?? "[]", receivedAt: $0[7].double ?? 0, nextAttemptAt: $0[8].double,
                lastError: $0[9].text)
        }
    }

    public func list(state: QueueState?, limit: Int) async throws -> [QueueRow] {
        try await rows(
            "WHERE CAST($1 AS TEXT) IS NULL OR state = $1 ORDER BY id DESC LIMIT $2", [.optional(state?.rawValue), .int(Int64(min(limit, Int(Int64.max))))])
    }

    public func show(jti: String) async throws -> QueueRow? {
        guard let id = try await session.rows("SELECT id FROM sets WHERE jti = $1 ORDER BY id LIMIT 1", [.text(jti)]).first?[0].int else { return nil }
        return try await rows(ids: [id]).first
    }

    public func rows(ids: [Int64]) async throws -> [QueueRow] {
        var byID: [Int64: QueueRow] = [:], applied: [Int64: [AppliedAction]] = [:]
        for (list, binds) in chunks(ids) {
            for row in try await rows("WHERE id IN (\(list))", binds) { byID[row.id] = row }
            for action in try await session.rows(
                "SELECT set_id, event_index, action, result, applied_at FROM applied_actions WHERE set_id IN (\(list)) ORDER BY set_id, event_index, applied_at",
                binds)
            {
                applied[action[0].int, default: []].append(
                    AppliedAction(eventIndex: Int(action[1].int), action: action[2].text ?? "", result: action[3].text ?? "", appliedAt: action[4].double ?? 0))
            }
        }
        return ids.compactMap { id in
            guard var row = byID[id] else { return nil }
            row.actions = applied[id] ?? []
            return row
        }
    }

    public func retry(jti: String?) async throws -> Int {
        let which = jti == nil ? "state = 'dead'" : "jti = $1 AND state IN ('dead', 'pending')"
        return try await session.transaction([("UPDATE sets SET \(session.requeueAssignments) WHERE \(which) RETURNING id", jti.map { [.text($0)] } ?? [])])[0].count
    }

    /// The dead letters chosen and locked first, then exactly those deleted with their applied actions.
    public func purgeDead(olderThan: Double, now: Double) async throws -> Int {
        let chosen = "SELECT id FROM sets WHERE state = 'dead' AND received_at < $1 ORDER BY id" + session.lockRows
        return try await session.transaction(steps: [
            { _ in [(chosen, [.double(now - olderThan)])] },
            { before in
                chunks(before[0].map { $0[0] }).flatMap { list, binds in
                    [("DELETE FROM applied_actions WHERE set_id IN (\(list))", binds), ("DELETE FROM sets WHERE id IN (\(list)) RETURNING id", binds)]
                }
            },
        ])[1].count
    }

    /// The WHERE clause of a selection, over binds $1 jti, $2 since, $3 until, $4 dead only.
    private static let selected = """
        (CAST($1 AS TEXT) IS NULL OR jti = $1) AND (CAST($2 AS DOUBLE PRECISION) IS NULL OR received_at >= $2)
          AND (CAST($3 AS DOUBLE PRECISION) IS NULL OR received_at <= $3) AND ($4 = 0 OR state = 'dead') AND pruned_at IS NULL
        """

    private static func binds(_ selection: StoredSETSelection) -> [SQLValue] {
        [.optional(selection.jti), .optional(selection.since), .optional(selection.until), .int(selection.deadOnly ? 1 : 0)]
    }

    public func tokens(_ selection: StoredSETSelection) async throws -> [(id: Int64, jti: String, token: String)] {
        try await session.rows(
            "SELECT id, jti, token FROM sets WHERE \(Self.selected) AND id > $6 ORDER BY id LIMIT $5",
            Self.binds(selection) + [.int(Int64(selection.limit)), .int(selection.after)]
        ).map { ($0[0].int, $0[1].text ?? "", $0[2].text ?? "") }
    }

    public func ids(_ selection: StoredSETSelection) async throws -> [Int64] {
        try await session.rows("SELECT id FROM sets WHERE \(Self.selected) ORDER BY id", Self.binds(selection)).map { $0[0].int }
    }

    /// Puts the SETs back as if they had just arrived, for `risc replay --local`: pending, no
    /// attempts, and the record of what was applied for them forgotten, so a worker runs their
    /// actions again (the ordering rule still holds: an old event never undoes a newer one).
    public func requeue(ids: [Int64]) async throws -> [Int64] {
        let statements = chunks(ids).flatMap { list, binds in
            [
                ("UPDATE sets SET \(session.requeueAssignments), last_error = NULL, processed_at = NULL WHERE id IN (\(list))", binds),
                ("DELETE FROM applied_actions WHERE set_id IN (\(list))", binds),
            ]
        }
        if !statements.isEmpty { _ = try await session.transaction(statements) }
        return ids
    }

    /// The acknowledged jtis against the store, in one pass over the table (`jti` alone is not
    /// indexed: the unique key is issuer + jti), with the store's own integrity check if it has one.
    public func audit(acknowledged jtis: [String]) async throws -> StoreAudit {
        var audit = StoreAudit()
        audit.integrity = try await session.integrityCheck()
        var found: [String: (done: Bool, actions: Int64)] = [:]
        for row in try await session.rows("SELECT s.jti, s.state, (SELECT count(*) FROM applied_actions a WHERE a.set_id = s.id) FROM sets s", []) {
            found[row[0].text ?? ""] = (row[1].text == QueueState.done.rawValue, row[2].int)
            audit.rows += 1
        }
        audit.count(jtis, found: found)
        return audit
    }
}
