import Foundation
import Logging
import PostgresNIO
public import RISCCore

/// The shared store's `QueueAdministration`: what `risc queue` and `risc replay` read and change.
public struct PostgresQueueAdmin: QueueAdministration {
    public let database: PostgresDatabase

    public init(database: PostgresDatabase) { self.database = database }

    var logger: Logger { database.logger }

    public func counts(now: Double) async throws -> QueueCounts {
        var groups: [(state: String, retried: Bool, count: Int, firstReceived: Double?)] = []
        let rows = try await database.client.query("SELECT state, attempts > 0, count(*), min(received_at) FROM sets GROUP BY state, attempts > 0", logger: logger)
        for try await (state, retried, count, first) in rows.decode((String, Bool, Int64, Double?).self) { groups.append((state, retried, Int(count), first)) }
        var counts = QueueCounts(groups: groups, now: now)
        for (sql, keyPath) in [(QueueCounts.lastRetryErrorSQL, \QueueCounts.lastRetryError), (QueueCounts.lastDeadErrorSQL, \QueueCounts.lastDeadError)] {
            for try await (jti, error) in try await database.client.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode((String, String?).self) {
                counts[keyPath: keyPath] = (jti, error ?? "")
            }
        }
        return counts
    }

    /// The columns `rows(_:)` reads, in its order.
    static let rowColumns = "id, jti, iss, state, attempts, deliveries, event_types, received_at, next_attempt_at, last_error"

    private func rows(_ query: PostgresQuery) async throws -> [QueueRow] {
        var result: [QueueRow] = []
        let rows = try await database.client.query(query, logger: logger)
        for try await (id, jti, issuer, stateText, attempts, deliveries, types, received, next, error) in rows.decode(
            (Int64, String, String, String, Int, Int, String, Double, Double, String?).self)
        {
            result.append(
                QueueRow(
                    id: id, jti: jti, issuer: issuer, stateText: stateText, attempts: attempts, deliveries: deliveries, eventTypesJSON: types,
                    receivedAt: received, nextAttemptAt: next, lastError: error))
        }
        return result
    }

    public func list(state: QueueState?, limit: Int) async throws -> [QueueRow] {
        let stateText = state?.rawValue
        return try await rows(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(Self.rowColumns) FROM sets WHERE $1::text IS NULL OR state = $1 ORDER BY id DESC LIMIT $2
                    """, binds: try binds(stateText, Int64(min(limit, Int(Int64.max))))))
    }

    public func show(jti: String) async throws -> QueueRow? {
        var id: Int64?
        for try await value in try await database.client.query("SELECT id FROM sets WHERE jti = \(jti) ORDER BY id LIMIT 1", logger: logger)
            .decode(Int64.self)
        {
            id = value
        }
        guard let id else { return nil }
        return try await rows(ids: [id]).first
    }

    public func rows(ids: [Int64]) async throws -> [QueueRow] {
        guard !ids.isEmpty else { return [] }
        var byID: [Int64: QueueRow] = [:]
        for row in try await rows(PostgresQuery(unsafeSQL: "SELECT \(Self.rowColumns) FROM sets WHERE id = ANY($1)", binds: try binds(ids))) {
            byID[row.id] = row
        }
        let actions = try await database.client.query(
            """
            SELECT set_id, event_index, action, result, applied_at FROM applied_actions WHERE set_id = ANY(\(ids))
            ORDER BY set_id, event_index, applied_at
            """, logger: logger)
        var applied: [Int64: [AppliedAction]] = [:]
        for try await (id, index, action, result, at) in actions.decode((Int64, Int, String, String, Double).self) {
            applied[id, default: []].append(AppliedAction(eventIndex: index, action: action, result: result, appliedAt: at))
        }
        return ids.compactMap { id in
            guard var row = byID[id] else { return nil }
            row.actions = applied[id] ?? []
            return row
        }
    }

    /// The acknowledged jtis against the store; no integrity check of the server's own to offer
    /// (`integrity` nil): its WAL and checksums are its business.
    public func audit(acknowledged jtis: [String]) async throws -> StoreAudit {
        var audit = StoreAudit()
        let rows = try await database.client.query(
            """
            SELECT s.jti, s.state = 'done', (SELECT count(*) FROM applied_actions a WHERE a.set_id = s.id) FROM sets s
            """, logger: logger)
        var found: [String: (done: Bool, actions: Int64)] = [:]
        for try await (jti, done, actions) in rows.decode((String, Bool, Int64).self) {
            found[jti] = (done, actions)
            audit.rows += 1
        }
        audit.count(jtis, found: found)
        return audit
    }

    public func retry(jti: String?) async throws -> Int {
        let query: PostgresQuery =
            if let jti {
                """
                UPDATE sets SET \(unescaped: PostgresSchema.requeueAssignments)
                WHERE jti = \(jti) AND state IN ('dead', 'pending') RETURNING id
                """
            } else {
                """
                UPDATE sets SET \(unescaped: PostgresSchema.requeueAssignments)
                WHERE state = 'dead' RETURNING id
                """
            }
        return try await count(query)
    }

    public func purgeDead(olderThan: Double, now: Double) async throws -> Int {
        let before = now - olderThan
        return try await database.client.withTransaction(logger: logger) { connection in
            var ids: [Int64] = []
            for try await id in try await connection.query(
                "DELETE FROM sets WHERE state = 'dead' AND received_at < \(before) RETURNING id", logger: logger
            ).decode(Int64.self) {
                ids.append(id)
            }
            if !ids.isEmpty { try await connection.query("DELETE FROM applied_actions WHERE set_id = ANY(\(ids))", logger: logger) }
            return ids.count
        }
    }

    /// The WHERE clause of a selection, over binds $1 jti, $2 since, $3 until, $4 dead only.
    private static let selected = """
        ($1::text IS NULL OR jti = $1) AND ($2::float8 IS NULL OR received_at >= $2) AND ($3::float8 IS NULL OR received_at <= $3)
          AND (NOT $4::boolean OR state = 'dead') AND pruned_at IS NULL
        """

    public func tokens(_ selection: StoredSETSelection) async throws -> [(id: Int64, jti: String, token: String)] {
        var bindings = try binds(selection.jti, selection.since, selection.until, selection.deadOnly)
        bindings.append(Int64(selection.limit))
        bindings.append(selection.after)
        let rows = try await database.client.query(
            PostgresQuery(unsafeSQL: "SELECT id, jti, token FROM sets WHERE \(Self.selected) AND id > $6 ORDER BY id LIMIT $5", binds: bindings), logger: logger)
        var result: [(id: Int64, jti: String, token: String)] = []
        for try await (id, jti, token) in rows.decode((Int64, String, String).self) { result.append((id, jti, token)) }
        return result
    }

    public func ids(_ selection: StoredSETSelection) async throws -> [Int64] {
        let rows = try await database.client.query(
            PostgresQuery(
                unsafeSQL: "SELECT id FROM sets WHERE \(Self.selected) ORDER BY id",
                binds: try binds(selection.jti, selection.since, selection.until, selection.deadOnly)), logger: logger)
        var result: [Int64] = []
        for try await id in rows.decode(Int64.self) { result.append(id) }
        return result
    }

    public func requeue(ids: [Int64]) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        try await database.client.withTransaction(logger: logger) { connection in
            try await connection.query(
                """
                UPDATE sets SET \(unescaped: PostgresSchema.requeueAssignments), last_error = NULL, processed_at = NULL
                WHERE id = ANY(\(ids))
                """, logger: logger)
            try await connection.query("DELETE FROM applied_actions WHERE set_id = ANY(\(ids))", logger: logger)
        }
        return ids
    }

    private func count(_ query: PostgresQuery) async throws -> Int {
        var n = 0
        for try await _ in try await database.client.query(query, logger: logger).decode(Int64.self) { n += 1 }
        return n
    }

    private func binds(_ values: (any PostgresEncodable & Sendable)?...) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        for value in values {
            if let value { try bindings.append(value) } else { bindings.appendNull() }
        }
        return bindings
    }
}
