import Foundation
import Logging
import PostgresNIO
public import RISCCore

/// The shared store's `WorkQueue`: leases on `sets` rows (`lease_owner`, `lease_expires_at`),
/// claimed with `FOR UPDATE SKIP LOCKED` so receivers never wait for each other's claims.
///
/// Exactly once per (SET, event, action): `finish` runs in one transaction that first locks the
/// SET's row and checks that the caller still holds the lease, so two finishers of one SET (the
/// lease's holder, late, and the receiver that rescued it) are serialized and the second finds
/// the SET no longer leased to it; inside, each action is looked up in `applied_actions` before it
/// is applied and recorded there in the same transaction.
public final class PostgresWorkQueue: WorkQueue, Sendable {
    public let database: PostgresDatabase
    /// The token-fingerprint key (`accounts.token_key_file`), for `token-revoked` lookups.
    let tokenKey: [UInt8]
    /// Channel the event store notifies after each commit: a wake-up hint for idle workers.
    public static let channel = "risc_sets"

    public init(database: PostgresDatabase, tokenKey: [UInt8]) {
        self.database = database
        self.tokenKey = tokenKey
    }

    var logger: Logger { database.logger }

    /// Seconds any one queue call may take: the worker moves on (and a lease expires) rather than
    /// hang on a server that went away; a finish that commits after its deadline is harmless
    /// (the lease makes any later finish or failure of the same claim a no-op).
    static let deadline: Double = 30

    /// A queue call: given up at `deadline`; a driver's error told in the store's words
    /// (`PostgresDatabase.explain`: the server's message, not PostgresNIO's generic text), as the
    /// worker logs it and records it with the SET.
    private func call<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        do {
            return try await withDeadline(Self.deadline, what, clock: database.clock, body)
        } catch {
            throw PostgresDatabase.explained(error)
        }
    }

    public func claim(owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope) async throws -> [ClaimedSET] {
        try await call("claiming queued SETs") {
            try await self.claimNow(owner: owner, limit: limit, lease: lease, now: now, horizon: horizon, scope: scope)
        }
    }

    private func claimNow(owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope) async throws -> [ClaimedSET] {
        // The rows due, then (only when they do not fill the batch) those due past the horizon,
        // written before the clock stepped back (`QueueTime`): each a range of the queue index,
        // not a scan of every row scheduled in between.
        let due = try await claimRange(after: -.infinity, upTo: now, owner: owner, limit: limit, lease: lease, now: now, horizon: horizon, scope: scope)
        guard due.count < limit, horizon.isFinite else { return due }
        return due
            + (try await claimRange(
                after: now + horizon, upTo: .infinity, owner: owner, limit: limit - due.count, lease: lease, now: now, horizon: horizon, scope: scope))
    }

    /// Claims due rows whose next attempt is in `(after, upTo]`, in the index's order.
    private func claimRange(
        after: Double, upTo: Double, owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope
    ) async throws -> [ClaimedSET] {
        let expires = now + lease, beyond = now + horizon
        let any = scope == .all, notices = scope == .notices
        let rows = try await database.client.query(
            """
            UPDATE sets SET lease_owner = \(owner), lease_expires_at = \(expires)
            WHERE id IN (SELECT id FROM sets
                         WHERE state = 'pending' AND next_attempt_at > \(after) AND next_attempt_at <= \(upTo)
                           AND (lease_expires_at IS NULL OR lease_expires_at < \(now) OR lease_expires_at > \(beyond))
                           AND (\(any) OR (issuer = \(UnlinkNotices.queueIssuer)) = \(notices))
                         ORDER BY next_attempt_at, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
            RETURNING id, issuer, jti, token, attempts, next_attempt_at, coalesce(retry_since, received_at)
            """, logger: logger)
        var claimed: [(ClaimedSET, Double)] = []
        for try await (id, issuer, jti, token, attempts, due, since) in rows.decode((Int64, String, String, String, Int, Double, Double).self) {
            claimed.append(
                (
                    ClaimedSET(id: id, issuer: issuer, jti: jti, token: token, attempts: attempts, owner: owner, leaseExpiresAt: expires, retrySince: since),
                    due
                ))
        }
        return claimed.sorted { ($0.1, $0.0.id) < ($1.1, $1.0.id) }.map(\.0)
    }

    public func finish(_ items: [FinishItem], applyToAccounts: Bool, now: Double) async throws -> [FinishReport?] {
        guard !items.isEmpty else { return [] }
        return try await call("finishing \(items.count) SET(s)") {
            try await self.finishNow(items, applyToAccounts: applyToAccounts, now: now)
        }
    }

    private func finishNow(_ items: [FinishItem], applyToAccounts: Bool, now: Double) async throws -> [FinishReport?] {
        let logger = self.logger
        let tokenKey = self.tokenKey
        return try await database.client.withTransaction(logger: logger) { connection -> [FinishReport?] in
            // The row locks (taken in id order, so two finishers cannot deadlock on them) serialize
            // finishers of a SET; the owner check makes a late one a no-op.
            let ids = items.map(\.claim.id), owners = items.map(\.claim.owner)
            var held = Set<Int64>()
            for try await id in try await connection.query(
                """
                SELECT s.id FROM sets s JOIN unnest(\(ids)::int8[], \(owners)::text[]) AS c(id, owner) ON s.id = c.id
                WHERE s.state = 'pending' AND s.lease_owner = c.owner ORDER BY s.id FOR UPDATE OF s
                """, logger: logger
            ).decode(Int64.self) {
                held.insert(id)
            }
            guard !held.isEmpty else { return items.map { _ in nil } }
            var applier = PostgresActionApplier(connection: connection, tokenKey: tokenKey, logger: logger)
            if applyToAccounts {
                try await applier.loadApplied(setIDs: Array(held))
                try await applier.preload(items.filter { held.contains($0.claim.id) }.map { ($0.plan.steps, $0.claim.issuer) })
            }
            var reports: [FinishReport?] = []
            var done: [(id: Int64, attempts: Int)] = []
            for item in items {
                let claim = item.claim
                guard held.remove(claim.id) != nil else {
                    reports.append(nil)
                    continue
                }
                var report = FinishReport()
                if let claims = item.claims {
                    report.verifications = try await PostgresVerifications.records(
                        for: item.plan, claims: claims, id: claim.id, jti: claim.jti, compact: claim.token, connection: connection, logger: logger, now: now)
                }
                if applyToAccounts {
                    report.outcomes = try await applier.apply(item.plan, setID: claim.id, keyIssuer: claim.issuer, now: now)
                } else if !item.tokens.isEmpty {
                    try await applier.markRevoked(item.tokens, now: now)
                }
                done.append((claim.id, claim.attempts + 1))
                reports.append(report)
            }
            try await applier.recordApplied(now: now)
            try await connection.query(
                """
                UPDATE sets SET state = 'done', attempts = d.attempts, processed_at = \(now), last_error = NULL,
                    lease_owner = NULL, lease_expires_at = NULL
                FROM unnest(\(done.map(\.id))::int8[], \(done.map { Int64($0.attempts) })::int8[]) AS d(id, attempts)
                WHERE sets.id = d.id
                """, logger: logger)
            return reports
        }
    }

    public func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) async throws -> [TokenToRevoke] {
        guard plan.steps.contains(where: { TokenToRevoke.wanted(by: $0) != (false, false) }) else { return [] }
        let (logger, tokenKey) = (self.logger, self.tokenKey)
        return try await call("looking up tokens to revoke") {
            try await self.database.client.withConnection { connection in
                try await PostgresActionApplier(connection: connection, tokenKey: tokenKey, logger: logger).tokensToRevoke(plan, keyIssuer: keyIssuer)
            }
        }
    }

    public func fail(_ claim: ClaimedSET, error: String, retryAt: Double?, now: Double) async throws -> Bool {
        try await call("recording a failure") { try await self.failNow(claim, error: error, retryAt: retryAt, now: now) }
    }

    private func failNow(_ claim: ClaimedSET, error: String, retryAt: Double?, now: Double) async throws -> Bool {
        let state = (retryAt == nil ? QueueState.dead : .pending).rawValue
        let rows = try await database.client.query(
            """
            UPDATE sets SET attempts = \(claim.attempts + 1), last_error = \(error), next_attempt_at = \(retryAt ?? now), state = \(state),
                lease_owner = NULL, lease_expires_at = NULL
            WHERE id = \(claim.id) AND state = 'pending' AND lease_owner = \(claim.owner)
            RETURNING id
            """, logger: logger)
        var changed = false
        for try await _ in rows.decode(Int64.self) { changed = true }
        return changed
    }

    public func rescueExpiredLeases(now: Double, horizon: Double) async throws -> [String] {
        try await call("rescuing leases") { try await self.rescueNow(now: now, horizon: horizon) }
    }

    private func rescueNow(now: Double, horizon: Double) async throws -> [String] {
        let beyond = now + horizon
        let rows = try await database.client.query(
            """
            UPDATE sets SET lease_owner = NULL, lease_expires_at = NULL
            WHERE id IN (SELECT id FROM sets WHERE state = 'pending' AND (lease_expires_at < \(now) OR lease_expires_at > \(beyond))
                         LIMIT 1000 FOR UPDATE SKIP LOCKED)
            RETURNING jti
            """, logger: logger)
        var rescued: [String] = []
        for try await jti in rows.decode(String.self) { rescued.append(jti) }
        return rescued
    }

    /// Waits for the event store's commit notifications and calls `wake` for each, reconnecting
    /// a second of the database's clock after a failure, until the task is cancelled. Only a
    /// hint: workers poll anyway.
    public func listen(wake: @escaping @Sendable () -> Void) async {
        while !Task.isCancelled {
            do {
                try await database.client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        for try await _ in notifications { wake() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
            }
            await waitUntil(database.clock() + 1, clock: database.clock)
        }
    }
}

/// Applies a plan to the shared account store inside the caller's transaction, with the same
/// rules and event-log results as the embedded store's applier.
struct PostgresActionApplier {
    let connection: PostgresConnection
    let tokenKey: [UInt8]
    let logger: Logger

    typealias Account = AccountActions.Account

    /// `applied_actions` rows already there for the SETs being finished (a requeued SET's), as
    /// `set_id/event_index/action` keys.
    private(set) var applied = Set<String>()
    /// Rows to add to `applied_actions` at the end of the transaction.
    private(set) var pending: [(setID: Int64, eventIndex: Int, action: String, result: String)] = []

    /// Google subjects (`scope NUL sub`) `preload` looked up: the account, or nil for none.
    private(set) var preloaded: [String: Account?] = [:]

    private static func key(_ setID: Int64, _ eventIndex: Int, _ action: String) -> String { "\(setID)/\(eventIndex)/\(action)" }

    /// Looks up, in one query, the accounts of the Google subjects the steps are about, so that
    /// `resolve` needs no query of its own for them, and locks them in id order: two transactions
    /// applying batches about the same accounts then wait for each other instead of deadlocking
    /// (each would otherwise lock them in its own SETs' order). The `access_changed_at` read here may be
    /// older than the row's by the time an action runs (an earlier SET of the batch changed it):
    /// it only feeds the ordering rule's early answer, which is then more permissive, and the
    /// conditional UPDATE decides.
    mutating func preload(_ plans: [(steps: [ActionPlan.Step], keyIssuer: String)]) async throws {
        var scopes: [String] = [], subjects: [String] = []
        for (steps, keyIssuer) in plans {
            for step in steps {
                guard let (_, sub) = step.subject?.googleSubject else { continue }
                scopes.append(step.accountScope(keyIssuer: keyIssuer))
                subjects.append(sub)
            }
        }
        guard !scopes.isEmpty else { return }
        for (scope, sub) in zip(scopes, subjects) { preloaded[scope + "\u{0}" + sub] = .some(nil) }
        let rows = try await connection.query(
            """
            SELECT a.issuer, a.subject, a.id, a.access_changed_at
            FROM accounts a JOIN unnest(\(scopes)::text[], \(subjects)::text[]) AS u(i, s) ON a.issuer = u.i AND a.subject = u.s
            ORDER BY a.id FOR UPDATE OF a
            """, logger: logger)
        for try await (issuer, subject, id, changed) in rows.decode((String, String, Int64, Double?).self) {
            preloaded[issuer + "\u{0}" + subject] = Account(id: id, accessChangedAt: changed)
        }
    }

    /// Drops what `apply` collected for `setID` (its savepoint was rolled back).
    mutating func forget(setID: Int64) {
        let prefix = "\(setID)/"
        applied = applied.filter { !$0.hasPrefix(prefix) }
        pending.removeAll { $0.setID == setID }
    }

    mutating func loadApplied(setIDs: [Int64]) async throws {
        let rows = try await connection.query(
            "SELECT set_id, event_index, action FROM applied_actions WHERE set_id = ANY(\(setIDs)::int8[])", logger: logger)
        for try await (setID, index, action) in rows.decode((Int64, Int, String).self) { applied.insert(Self.key(setID, index, action)) }
    }

    /// Writes the rows `apply` collected, in one statement.
    mutating func recordApplied(now: Double) async throws {
        guard !pending.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO applied_actions (set_id, event_index, action, applied_at, result)
            SELECT s, e, a, \(now), r FROM unnest(\(pending.map(\.setID))::int8[], \(pending.map { Int64($0.eventIndex) })::int8[],
                                                \(pending.map(\.action))::text[], \(pending.map(\.result))::text[]) AS t(s, e, a, r)
            """, logger: logger)
        pending.removeAll()
    }

    /// Applies `plan`'s actions not yet applied for `setID` (see `loadApplied`, which must have
    /// been called for it); `recordApplied` then records them.
    mutating func apply(_ plan: ActionPlan, setID: Int64, keyIssuer: String, now: Double) async throws -> [ActionOutcome] {
        var accounts: [Account?] = []
        for step in plan.steps { accounts.append(try await resolve(step, keyIssuer: keyIssuer)) }
        let applied = self.applied
        var outcomes: [ActionOutcome] = []
        for planned in AccountActions.plan(plan, accounts: accounts, alreadyApplied: { applied.contains(Self.key(setID, $0, $1.rawValue)) }) {
            let result = try await planned.result { try await execute($0, now: now) }
            if planned.isNew {
                self.applied.insert(Self.key(setID, planned.eventIndex, planned.action.rawValue))
                pending.append((setID, planned.eventIndex, planned.action.rawValue, result))
            }
            outcomes.append(planned.outcome(result))
        }
        return outcomes
    }

    /// See `WorkQueue.tokensToRevoke`.
    func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) async throws -> [TokenToRevoke] {
        var tokens: [TokenToRevoke] = []
        for step in plan.steps {
            let (linked, matched) = TokenToRevoke.wanted(by: step)
            guard linked || matched, let account = try await resolve(step, keyIssuer: keyIssuer) else { continue }
            let reason = step.recordedReason
            if linked {
                let rows = try await connection.query(
                    """
                    SELECT id, hash FROM tokens WHERE account_id = \(account.id) AND kind = 'linked' AND revoked_at IS NULL ORDER BY id
                    """, logger: logger)
                for try await (id, hash) in rows.decode((Int64, String).self) {
                    tokens.append(TokenToRevoke(id: id, eventIndex: step.eventIndex, action: .revokeLinkedTokens, kind: .linked, hash: hash, reason: reason))
                }
            }
            if matched, let tokenID = account.tokenID {
                let rows = try await connection.query("SELECT kind, hash FROM tokens WHERE id = \(tokenID)", logger: logger)
                for try await (kind, hash) in rows.decode((String, String).self) {
                    tokens.append(
                        TokenToRevoke(
                            id: tokenID, eventIndex: step.eventIndex, action: .revokeToken, kind: TokenKind(rawValue: kind) ?? .linked, hash: hash,
                            reason: reason))
                }
            }
        }
        return tokens
    }

    /// Marks `tokens` revoked (those still active), in the caller's transaction.
    func markRevoked(_ tokens: [TokenToRevoke], now: Double) async throws {
        try await connection.query(
            """
            UPDATE tokens SET revoked_at = \(now), revoked_reason = r.reason
            FROM unnest(\(tokens.map(\.id))::int8[], \(tokens.map(\.reason))::text[]) AS r(id, reason)
            WHERE tokens.id = r.id AND tokens.revoked_at IS NULL
            """, logger: logger)
    }

    private func count(_ query: PostgresQuery) async throws -> Int {
        var n = 0
        for try await _ in try await connection.query(query, logger: logger).decode(Int64.self) { n += 1 }
        return n
    }

    /// The account an event is about (`AccountActions.lookups`); nil: not one of ours.
    private func resolve(_ step: ActionPlan.Step, keyIssuer: String) async throws -> Account? {
        for lookup in AccountActions.lookups(for: step, keyIssuer: keyIssuer, tokenKey: tokenKey) {
            switch lookup {
            case .token(let column, let value):
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT t.account_id, t.id, t.\(column.rawValue), a.access_changed_at FROM tokens t JOIN accounts a ON a.id = t.account_id
                            WHERE t.\(column.rawValue) = $1 AND t.revoked_at IS NULL ORDER BY t.id LIMIT 1
                            """, binds: try Self.bindings(value)), logger: logger)
                for try await (account, token, stored, changed) in rows.decode((Int64, Int64, String, Double?).self)
                where TokenFingerprint.constantTimeEquals(stored, value) {
                    return Account(id: account, tokenID: token, accessChangedAt: changed)
                }
            case .subject(let issuer, let subject):
                if let known = preloaded[issuer + "\u{0}" + subject] {
                    if let known { return known }
                } else if let found = try await account(
                    "SELECT id, access_changed_at FROM accounts WHERE issuer = \(issuer) AND subject = \(subject) LIMIT 1")
                {
                    return found
                }
            case .email(let email):
                if let found = try await account("SELECT id, access_changed_at FROM accounts WHERE email = \(email) ORDER BY id LIMIT 1") {
                    return found
                }
            }
        }
        return nil
    }

    private func account(_ query: PostgresQuery) async throws -> Account? {
        for try await (id, changed) in try await connection.query(query, logger: logger).decode((Int64, Double?).self) {
            return Account(id: id, accessChangedAt: changed)
        }
        return nil
    }

    /// `values`, then `more` (the optional ones a statement was given).
    private static func bindings(_ values: any PostgresEncodable & Sendable..., then more: [String] = []) throws -> PostgresBindings {
        var binds = PostgresBindings()
        for value in values { try binds.append(value) }
        for value in more { binds.append(value) }
        return binds
    }

    /// Runs one primitive; the rows it changed.
    private func execute(_ primitive: AccountActions.Primitive, now: Double) async throws -> Int {
        switch primitive {
        case .endSessions(let account, let createdBy, let googleOnly, let reason, let sessionID):
            try await count(
                PostgresQuery(
                    unsafeSQL: """
                        UPDATE sessions SET ended_at = $1, ended_reason = $2 WHERE account_id = $3 AND ended_at IS NULL AND created_at <= $4
                        """ + (googleOnly ? " AND via_google = 1" : "") + (sessionID == nil ? "" : " AND session_id = $5") + " RETURNING id",
                    binds: try Self.bindings(now, reason, account, createdBy, then: sessionID.map { [$0] } ?? [])))
        case .revokeTokens(let account, let kind, let reason):
            try await count(
                """
                UPDATE tokens SET revoked_at = \(now), revoked_reason = \(reason)
                WHERE account_id = \(account) AND kind = \(kind.rawValue) AND revoked_at IS NULL RETURNING id
                """)
        case .revokeToken(let id, let reason):
            // With every active copy an older store may hold of the same token.
            try await count(
                """
                UPDATE tokens SET revoked_at = \(now), revoked_reason = \(reason)
                WHERE (account_id, kind, hash) = (SELECT account_id, kind, hash FROM tokens WHERE id = \(id)) AND revoked_at IS NULL RETURNING id
                """)
        case .setAccess(let account, let flag, let enabled, let eventTime):
            // OrderingRule in one statement: applied only while no newer access change is recorded.
            try await count(
                PostgresQuery(
                    unsafeSQL: """
                        UPDATE accounts SET \(flag.rawValue) = $1, access_changed_at = greatest(coalesce(access_changed_at, 0), $2), updated_at = $3
                        WHERE id = $4 AND coalesce(access_changed_at, 0) <= $2 RETURNING id
                        """, binds: try Self.bindings(enabled ? 1 : 0, eventTime, now, account)))
        case .raise(let account, let flag):
            try await count(
                PostgresQuery(
                    unsafeSQL: "UPDATE accounts SET \(flag.rawValue) = 1, updated_at = $1 WHERE id = $2 RETURNING id",
                    binds: try Self.bindings(now, account)))
        }
    }
}
