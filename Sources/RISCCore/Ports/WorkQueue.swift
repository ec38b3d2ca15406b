/// A stored SET taken from the queue by one worker, with a lease: until `leaseExpiresAt` no other
/// worker takes it; after, any worker may rescue it.
public struct ClaimedSET: Sendable, Equatable {
    public let id: Int64
    /// The de-duplication scope (the key set's issuer).
    public let issuer: String
    public let jti: String
    /// The compact token as stored (already verified when it arrived).
    public let token: String
    /// Failed attempts so far.
    public let attempts: Int
    /// Who holds the lease (a receiver's worker id).
    public let owner: String
    public let leaseExpiresAt: Double
    /// Where its retry window starts: when it was received, or requeued by an operator.
    public let retrySince: Double

    public init(
        id: Int64, issuer: String, jti: String, token: String, attempts: Int, owner: String, leaseExpiresAt: Double, retrySince: Double = 0
    ) {
        self.id = id
        self.issuer = issuer
        self.jti = jti
        self.token = token
        self.attempts = attempts
        self.owner = owner
        self.leaseExpiresAt = leaseExpiresAt
        self.retrySince = retrySince
    }
}

/// Which queued rows a worker claims: everything, the issuers' SETs (and local records), or only
/// unlink notices (`UnlinkNotices.queueIssuer`). Notices get workers of their own, so a slow or
/// unreachable Google never holds up the actions of incoming events.
public enum ClaimScope: Sendable {
    case all, sets, notices

    /// Whether a row of `issuer` is in scope.
    public func includes(issuer: String) -> Bool {
        switch self {
        case .all: true
        case .sets: issuer != UnlinkNotices.queueIssuer
        case .notices: issuer == UnlinkNotices.queueIssuer
        }
    }
}

/// One action applied (or found already applied) for a SET's event.
public struct ActionOutcome: Sendable, Equatable {
    public var action: Action
    public var eventIndex: Int
    public var result: String

    public init(action: Action, eventIndex: Int, result: String) {
        self.action = action
        self.eventIndex = eventIndex
        self.result = result
    }

    /// The outcomes as the event log shows them.
    public static func json(_ outcomes: [ActionOutcome]) -> JSONValue {
        .array(outcomes.map { .object(["action": .string($0.action.rawValue), "result": .string($0.result)]) })
    }
}

/// What finishing a claimed SET did.
public struct FinishReport: Sendable {
    /// The actions applied to the store's accounts (empty when they went to a webhook).
    public var outcomes: [ActionOutcome]
    /// Event-log lines for verification events matched against `risc stream verify`'s requests.
    public var verifications: [EventLogRecord]

    public init(outcomes: [ActionOutcome] = [], verifications: [EventLogRecord] = []) {
        self.outcomes = outcomes
        self.verifications = verifications
    }
}

/// A claimed SET ready to be finished: its claims and the actions they call for.
public struct FinishItem: Sendable {
    public let claim: ClaimedSET
    public let plan: ActionPlan
    /// nil for an unlink notice (its plan is empty: nothing to apply or match).
    public let claims: SecurityEventToken?
    /// Tokens the webhook was told to revoke: marked revoked when the claim is finished without
    /// applying the plan to the accounts.
    public let tokens: [TokenToRevoke]

    public init(claim: ClaimedSET, plan: ActionPlan, claims: SecurityEventToken?, tokens: [TokenToRevoke] = []) {
        self.claim = claim
        self.plan = plan
        self.claims = claims
        self.tokens = tokens
    }
}

/// The work queue several workers (in one receiver or several) share: due SETs are claimed with
/// a lease, finished or failed only by the lease's holder, and rescued by anyone once the lease
/// has expired (its holder died). Finishing applies the plan's actions to the store's accounts
/// and marks the SET done in one transaction, and each (SET, event, action) is recorded in
/// `applied_actions`, so each is applied exactly once whoever finishes it.
public protocol WorkQueue: Sendable {
    /// Claims up to `limit` due SETs (pending, next attempt due, no live lease) for `owner` until
    /// `now + lease`, oldest due first, skipping the ones other workers are claiming. A next
    /// attempt or a lease's end more than `horizon` seconds after `now` was written before the
    /// wall clock stepped back (no backoff or lease is that long: `QueueWorker.horizon`): due, or
    /// expired, now, instead of waiting out the step.
    func claim(owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope) async throws -> [ClaimedSET]

    /// Finishes each item's claim: with `applyToAccounts`, applies its plan to the store's
    /// accounts (each action once: one already in `applied_actions` is reported, not applied
    /// again); records verification events; marks the SET done. The whole batch in one
    /// transaction (one durable commit for all), and each item only while its claim still holds
    /// its lease: nil in its place when it does not (the SET was rescued by another worker), in
    /// which case nothing of it was changed. A throw means nothing of the batch was changed.
    /// Without `applyToAccounts` (a webhook applied the plan), each item's `tokens` still
    /// active are marked revoked.
    func finish(_ items: [FinishItem], applyToAccounts: Bool, now: Double) async throws -> [FinishReport?]

    /// The tokens the store holds that `plan`'s actions revoke (`TokenToRevoke`), for the webhook.
    func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) async throws -> [TokenToRevoke]

    /// Records a failed attempt of `claim`: pending again at `retryAt`, or a dead letter when
    /// `retryAt` is nil. False when `claim` no longer holds its lease (nothing changed).
    func fail(_ claim: ClaimedSET, error: String, retryAt: Double?, now: Double) async throws -> Bool

    /// Releases leases that expired before `now` (their holders died or stalled), or that end more
    /// than `horizon` after it (written before the clock stepped back), so any worker claims that
    /// work next. Returns the jtis released.
    func rescueExpiredLeases(now: Double, horizon: Double) async throws -> [String]
}

/// How a queue tells, by the wall clock of the moment, whether a stored time has come: a due
/// time or a lease's end is past when it is before `now`, and also when it lies further ahead
/// than any backoff or lease could put it (`horizon`): it was written before the clock stepped
/// back, and would otherwise hold the work for as long as the step.
public enum QueueTime {
    /// Whether a next attempt at `due` may be tried at `now`.
    public static func isDue(_ due: Double, now: Double, horizon: Double) -> Bool { due <= now || due > now + horizon }

    /// Whether a lease ending at `end` no longer holds at `now`.
    public static func hasExpired(_ end: Double, now: Double, horizon: Double) -> Bool { end < now || end > now + horizon }
}

extension WorkQueue {
    /// Claims any due row (see `claim(owner:limit:lease:now:horizon:scope:)`), with no horizon.
    public func claim(owner: String, limit: Int, lease: Double, now: Double, scope: ClaimScope = .all) async throws -> [ClaimedSET] {
        try await claim(owner: owner, limit: limit, lease: lease, now: now, horizon: .infinity, scope: scope)
    }

    /// Releases leases that expired before `now`, with no horizon (see `rescueExpiredLeases(now:horizon:)`).
    public func rescueExpiredLeases(now: Double) async throws -> [String] { try await rescueExpiredLeases(now: now, horizon: .infinity) }

    /// Finishes one claim (see `finish(_:applyToAccounts:now:)`); nil when it lost its lease.
    public func finish(_ claim: ClaimedSET, plan: ActionPlan, claims: SecurityEventToken, applyToAccounts: Bool, now: Double) async throws
        -> FinishReport?
    {
        try await finish([FinishItem(claim: claim, plan: plan, claims: claims)], applyToAccounts: applyToAccounts, now: now).first ?? nil
    }
}

extension ActionOutcome {
    /// The result of an action that needs no account (`log_only`, `record_verification`), or
    /// nil for one that acts on the account. Every store's applier asks this first.
    public static func accountFree(_ action: Action, step: ActionPlan.Step) -> String? {
        switch action {
        case .logOnly: "logged"
        case .webhook: "delivered to the webhook"
        case .recordVerification: "state " + (step.state.map { "'\($0.prefix(200))'" } ?? "(none)")
        default: nil
        }
    }

    /// The result for an event about nobody the store knows: a logged no-op, never a failure.
    public static let unknownSubject = "unknown subject: no-op"
    /// `end_session` for a session named in a form risc cannot match (not `opaque`, `uri`, or an id): nothing ended.
    public static let sessionUnplaced = "the named session is in a form risc cannot match: no-op"
    /// `end_session` for a session the account does not have open (its id never logged: a session id is a credential).
    public static let sessionNotOpen = "the named session is not open here: no-op"
}

extension ActionPlan {
    /// The verification events' `state`s, in token order (nil: the event has none).
    public var verificationStates: [String?] {
        steps.filter { $0.type.canonical == .verification || $0.type.canonical == .ssfVerification }.map(\.state)
    }

    /// The event-log line for one verification event of SET `jti`: `matched` (with the round
    /// trip) when its `state` was requested at `requestedAt`, `unrequested` (a state not asked
    /// for, or already answered) or `no_state`.
    public static func verificationRecord(jti: String, state: String?, requestedAt: Double?, now: Double) -> EventLogRecord {
        var record = EventLogRecord(step: .verification, outcome: state == nil ? .noState : .unrequested, time: now)
        record["jti"] = .string(jti)
        if let state { record["state"] = .string(String(state.prefix(200))) }
        if let requestedAt {
            record.outcome = .matched
            record["round_trip_ms"] = .number(((now - requestedAt) * 1000).rounded())
        }
        return record
    }
}
