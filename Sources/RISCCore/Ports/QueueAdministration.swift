/// Where a stored SET stands in the queue.
public enum QueueState: String, Sendable, CaseIterable, Equatable {
    /// Waiting for its actions (first time, or a retry after `attempts` failures).
    case pending
    /// Its actions are applied (or delivered to the webhook).
    case done
    /// Its actions kept failing for `actions.retry_window`: a dead letter, kept until purged.
    case dead
}

/// The queue's counts, for `risc queue status`, `/readyz` and the drills.
public struct QueueCounts: Sendable, Equatable {
    public var pending = 0
    /// Pending SETs waiting for a retry after a failure.
    public var scheduledRetry = 0
    public var done = 0
    public var dead = 0
    /// Age of the oldest pending SET, if any, in whole seconds.
    public var oldestPendingAge: Double?
    /// Why SETs are retrying, and why the newest dead letter died: the `jti` and `last_error` of
    /// the retrying SET due last (the most recent failure) and of the newest dead letter.
    public var lastRetryError: (jti: String, error: String)?
    public var lastDeadError: (jti: String, error: String)?

    public init() {}

    /// The counts from (state, retried, count, oldest received) groups; the failures are filled apart.
    public init(groups: [(state: String, retried: Bool, count: Int, firstReceived: Double?)], now: Double) {
        var oldest: Double?
        for group in groups {
            switch (QueueState(rawValue: group.state), group.retried) {
            case (.pending?, false): pending += group.count
            case (.pending?, true): scheduledRetry += group.count
            case (.done?, _): done += group.count
            case (.dead?, _): dead += group.count
            case (nil, _): continue
            }
            if group.state == QueueState.pending.rawValue, let first = group.firstReceived { oldest = min(oldest ?? .infinity, first) }
        }
        oldestPendingAge = oldest.map { (now - $0).rounded() }
    }

    public static func == (a: QueueCounts, b: QueueCounts) -> Bool {
        (a.pending, a.scheduledRetry, a.done, a.dead, a.oldestPendingAge) == (b.pending, b.scheduledRetry, b.done, b.dead, b.oldestPendingAge)
            && a.lastRetryError?.jti == b.lastRetryError?.jti && a.lastRetryError?.error == b.lastRetryError?.error
            && a.lastDeadError?.jti == b.lastDeadError?.jti && a.lastDeadError?.error == b.lastDeadError?.error
    }

    public var json: JSONObject {
        var object = JSONObject()
        object["pending"] = .number(Double(pending))
        object["scheduled_retry"] = .number(Double(scheduledRetry))
        object["done"] = .number(Double(done))
        object["dead"] = .number(Double(dead))
        if let oldestPendingAge { object["oldest_pending_age_seconds"] = .number(oldestPendingAge) }
        for (name, failure) in [("last_retry_error", lastRetryError), ("last_dead_error", lastDeadError)] {
            guard let failure else { continue }
            object[name] = ["jti": .string(Printable.safe(failure.jti, maxBytes: 200)), "error": .string(Printable.safe(failure.error, maxBytes: 300))]
        }
        return object
    }
}

/// One action applied for a stored SET.
public struct AppliedAction: Sendable, Equatable {
    public let eventIndex: Int
    public let action: String
    public let result: String
    public let appliedAt: Double

    public init(eventIndex: Int, action: String, result: String, appliedAt: Double) {
        self.eventIndex = eventIndex
        self.action = action
        self.result = result
        self.appliedAt = appliedAt
    }
}

/// One stored SET as `risc queue` shows it.
public struct QueueRow: Sendable, Equatable {
    public let id: Int64
    public let jti: String
    /// `iss` as the token says.
    public let issuer: String
    public let state: QueueState
    public let attempts: Int
    public let deliveries: Int
    /// Event type URIs, in token order.
    public let eventTypes: [String]
    public let receivedAt: Double
    /// When a pending SET that has failed before is tried again.
    public let retryAt: Double?
    public let lastError: String?
    /// The actions applied for it (filled by `show`).
    public var actions: [AppliedAction]?

    public init(
        id: Int64, jti: String, issuer: String, state: QueueState, attempts: Int, deliveries: Int, eventTypes: [String],
        receivedAt: Double, retryAt: Double?, lastError: String?, actions: [AppliedAction]? = nil
    ) {
        self.id = id
        self.jti = jti
        self.issuer = issuer
        self.state = state
        self.attempts = attempts
        self.deliveries = deliveries
        self.eventTypes = eventTypes
        self.receivedAt = receivedAt
        self.retryAt = retryAt
        self.lastError = lastError
        self.actions = actions
    }

    /// A row as both stores keep it: `state` and `event_types` (a JSON array) as text, and the next
    /// attempt, which is a retry time only for a pending SET that has failed before.
    public init(
        id: Int64, jti: String, issuer: String, stateText: String, attempts: Int, deliveries: Int, eventTypesJSON: String, receivedAt: Double,
        nextAttemptAt: Double?, lastError: String?
    ) {
        let state = QueueState(rawValue: stateText) ?? .pending
        self.init(
            id: id, jti: jti, issuer: issuer, state: state, attempts: attempts, deliveries: deliveries,
            eventTypes: (try? JSONParser.parse(eventTypesJSON))?.arrayValue?.compactMap(\.stringValue) ?? [], receivedAt: receivedAt,
            retryAt: state == .pending && attempts > 0 ? nextAttemptAt : nil, lastError: lastError)
    }

    /// The row as `risc queue list`/`show` print it.
    public var json: JSONObject {
        var row = JSONObject()
        row["id"] = .number(Double(id))
        row["jti"] = .string(jti)
        row["iss"] = .string(issuer)
        row["state"] = .string(state.rawValue)
        row["attempts"] = .number(Double(attempts))
        row["deliveries"] = .number(Double(deliveries))
        row["events"] = .array(eventTypes.map { .string($0) })
        row["received_at"] = .string(Timestamp.iso8601(receivedAt))
        if let retryAt { row["retry_at"] = .string(Timestamp.iso8601(retryAt)) }
        if let lastError { row["last_error"] = .string(lastError) }
        if let actions {
            row["actions"] = .array(
                actions.map {
                    [
                        "event_index": .number(Double($0.eventIndex)), "action": .string($0.action), "result": .string($0.result),
                        "applied_at": .string(Timestamp.iso8601($0.appliedAt)),
                    ]
                })
        }
        return row
    }

    /// The row as `risc replay --local` reports a re-driven SET: where it stands (a pending one
    /// that failed before is `retrying`), its events' short names, the error, the actions.
    public var outcomeJSON: JSONObject {
        var object = JSONObject()
        object["jti"] = .string(jti)
        object["state"] = .string(state == .pending && attempts > 0 ? "retrying" : state.rawValue)
        object["events"] = .array(eventTypes.map { .string(EventType(name: $0)?.shortName ?? $0) })
        if let lastError { object["error"] = .string(lastError) }
        object["actions"] = .array((actions ?? []).map { ["action": .string($0.action), "result": .string($0.result)] })
        return object
    }
}

/// Which stored SETs `risc replay --from-store` and `--local` take.
public struct StoredSETSelection: Sendable {
    public var jti: String?
    public var since: Double?
    public var until: Double?
    public var deadOnly = false
    /// `tokens`: at most this many, those stored after the SET whose id is `after` (a page).
    public var limit = 1_000
    public var after: Int64 = 0

    public init(jti: String? = nil, since: Double? = nil, until: Double? = nil, deadOnly: Bool = false, limit: Int = 1_000, after: Int64 = 0) {
        self.jti = jti
        self.since = since
        self.until = until
        self.deadOnly = deadOnly
        self.limit = limit
        self.after = after
    }
}

/// What operators do with the queue (`risc queue`, `risc replay`, the drills), with typed rows:
/// no SQL and no state literals outside the store's adapter. Asynchronous, as a database server
/// answers; the embedded store's synchronous methods satisfy it.
public protocol QueueAdministration: Sendable {
    func counts(now: Double) async throws -> QueueCounts
    /// The newest SETs first, optionally of one state.
    func list(state: QueueState?, limit: Int) async throws -> [QueueRow]
    /// One SET by `jti` (the first stored), with the actions applied for it.
    func show(jti: String) async throws -> QueueRow?
    /// Puts SETs back to be tried now: one by `jti` (dead or pending), or every dead letter.
    /// Returns how many.
    func retry(jti: String?) async throws -> Int
    /// Deletes dead letters received more than `olderThan` seconds before `now`. Returns how many.
    func purgeDead(olderThan: Double, now: Double) async throws -> Int
    /// The chosen stored SETs' compact tokens, in arrival order.
    func tokens(_ selection: StoredSETSelection) async throws -> [(id: Int64, jti: String, token: String)]
    /// The chosen stored SETs' ids, in arrival order.
    func ids(_ selection: StoredSETSelection) async throws -> [Int64]
    /// Puts these SETs back as if just arrived (pending, no attempts, what was applied for them
    /// forgotten), for `risc replay --local`. Returns their ids.
    func requeue(ids: [Int64]) async throws -> [Int64]
    /// These SETs as they stand, each with the actions applied for it, in the given order.
    func rows(ids: [Int64]) async throws -> [QueueRow]
    /// Checks the store against the `jti`s a client saw acknowledged (`risc drill crash`).
    func audit(acknowledged: [String]) async throws -> StoreAudit
}

/// What the crash drill checks afterwards: for each acknowledged `jti`, that it is stored, done,
/// and that each of its planned actions was applied exactly once; and that the store is sound.
public struct StoreAudit: Sendable {
    public var acknowledged = 0
    public var stored = 0
    public var done = 0
    /// Acknowledged SETs with their actions recorded (once each: the record's key is
    /// (SET, event, action), written in the same transaction as the effect).
    public var applied = 0
    /// Acknowledged SETs with no recorded action.
    public var notApplied = 0
    /// Rows in the store overall (acknowledged or in flight at a kill).
    public var rows = 0
    /// The store's own consistency check (`PRAGMA integrity_check` for the embedded store: "ok"),
    /// nil where the store has none to offer.
    public var integrity: String?

    public init() {}

    public var lost: Int { acknowledged - stored }
    public var passed: Bool {
        lost == 0 && done == acknowledged && applied == acknowledged && (integrity ?? "ok") == "ok"
    }

    /// Counts `found` (by jti: done, actions recorded) against the acknowledged `jtis`.
    public mutating func count(_ jtis: [String], found: [String: (done: Bool, actions: Int64)]) {
        acknowledged = jtis.count
        for jti in jtis {
            guard let row = found[jti] else { continue }
            stored += 1
            if row.done { done += 1 }
            if row.actions == 0 { notApplied += 1 } else { applied += 1 }
        }
    }
}
