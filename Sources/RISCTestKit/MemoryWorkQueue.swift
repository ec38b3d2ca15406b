public import RISCCore
public import Synchronization

/// A work queue and account store kept in memory: the `WorkQueue` port's contract (leases, finish
/// and fail only by the lease's holder, each (SET, event, action) applied once) with
/// `AccountActions` applied to plain values, so the worker's and the applier's rules are tested
/// without SQL. The drivers' own suite (`StorePortTests`) holds them to the same contract.
public final class MemoryWorkQueue: WorkQueue, Sendable {
    public struct Row: Sendable {
        public let id: Int64
        public let issuer: String
        public let jti: String
        public var token: String
        public var state = QueueState.pending
        public var attempts = 0
        public var nextAttemptAt = 0.0
        public var lastError: String?
        public var receivedAt: Double
        var lease: (owner: String, expiresAt: Double)?
    }

    public struct Account: Sendable {
        public let id: Int64
        public let issuer: String
        public let subject: String
        public var email: String?
        /// Sessions: when each was opened, whether through Google, and when it ended.
        public var sessions: [(id: String, createdAt: Double, viaGoogle: Bool, endedAt: Double?)] = []
        /// Tokens: kind, fingerprints, whether revoked.
        public var tokens: [(id: Int64, kind: TokenKind, hash: String, prefixMAC: String, revoked: Bool)] = []
        public var flags: [AccountActions.AccessFlag: Bool] = [.googleSignIn: true, .emailRecovery: true]
        public var raised: Set<AccountActions.ReviewFlag> = []
        public var accessChangedAt: Double?

        public var openSessions: Int { sessions.count { $0.endedAt == nil } }
        public func activeTokens(_ kind: TokenKind) -> Int { tokens.count { $0.kind == kind && !$0.revoked } }
    }

    private struct State {
        var rows: [Row] = []
        var accounts: [Account] = []
        var applied: Set<String> = []
        var nextTokenID: Int64 = 1
    }
    private let state = Mutex(State())
    public let tokenKey: [UInt8]

    public init(tokenKey: [UInt8] = Array(repeating: 7, count: 32)) { self.tokenKey = tokenKey }

    /// While set, claims and lease rescues fail as a store that is away does.
    public let unavailable = Mutex(false)
    /// While set, a claim does not answer (until its task is cancelled), as a store that hangs.
    public let hanging = Mutex(false)
    /// Claims asked for so far.
    public let claims = Atomic<Int>(0)
    private func checkAvailable() throws {
        if unavailable.withLock({ $0 }) { throw StoreError(.unavailable, "the store is away (MemoryWorkQueue.unavailable)") }
    }

    /// Queues a stored SET, as an event store would.
    @discardableResult
    public func enqueue(issuer: String = "https://accounts.google.com", jti: String, token: String, receivedAt: Double) -> Int64 {
        state.withLock { state in
            let id = Int64(state.rows.count + 1)
            state.rows.append(Row(id: id, issuer: issuer, jti: jti, token: token, receivedAt: receivedAt))
            return id
        }
    }

    /// Links an account with sessions opened at `now` and tokens (Google refresh and linked).
    public func link(
        issuer: String = "https://accounts.google.com", subject: String, email: String? = nil, sessions: Int, googleTokens: [String] = [],
        linkedTokens: [String] = [], now: Double
    ) {
        state.withLock { state in
            var account = Account(id: Int64(state.accounts.count + 1), issuer: issuer, subject: subject, email: email)
            account.sessions = (0..<sessions).map { ("s-\($0 + 1)", now, true, nil) }
            for (kind, token) in googleTokens.map({ (TokenKind.googleRefresh, $0) }) + linkedTokens.map({ (TokenKind.linked, $0) }) {
                account.tokens.append(
                    (
                        state.nextTokenID, kind, SHA512.doubleHashBase64(token), TokenFingerprint.prefixMAC(token, key: tokenKey), false
                    ))
                state.nextTokenID += 1
            }
            state.accounts.append(account)
        }
    }

    public var rows: [Row] { state.withLock { $0.rows } }
    public func account(_ subject: String) -> Account? { state.withLock { $0.accounts.first { $0.subject == subject } } }

    // MARK: WorkQueue

    public func claim(owner: String, limit: Int, lease: Double, now: Double, horizon: Double, scope: ClaimScope) async throws -> [ClaimedSET] {
        claims.add(1, ordering: .relaxed)
        while hanging.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        try checkAvailable()
        return state.withLock { state in
            let due = state.rows.indices.filter { index in
                let row = state.rows[index]
                return row.state == .pending && QueueTime.isDue(row.nextAttemptAt, now: now, horizon: horizon)
                    && (row.lease.map { QueueTime.hasExpired($0.expiresAt, now: now, horizon: horizon) } ?? true)
                    && scope.includes(issuer: row.issuer)
            }
            .sorted { (state.rows[$0].nextAttemptAt, state.rows[$0].id) < (state.rows[$1].nextAttemptAt, state.rows[$1].id) }
            return due.prefix(limit).map { index in
                state.rows[index].lease = (owner, now + lease)
                let row = state.rows[index]
                return ClaimedSET(
                    id: row.id, issuer: row.issuer, jti: row.jti, token: row.token, attempts: row.attempts, owner: owner,
                    leaseExpiresAt: now + lease, retrySince: row.receivedAt)
            }
        }
    }

    public func finish(_ items: [FinishItem], applyToAccounts: Bool, now: Double) async throws -> [FinishReport?] {
        state.withLock { state in
            items.map { item -> FinishReport? in
                guard let index = state.rows.firstIndex(where: { $0.id == item.claim.id }), state.rows[index].state == .pending,
                    state.rows[index].lease?.owner == item.claim.owner
                else { return nil }
                var report = FinishReport()
                if applyToAccounts { report.outcomes = Self.apply(item.plan, claim: item.claim, tokenKey: tokenKey, to: &state) }
                state.rows[index].state = .done
                state.rows[index].attempts += 1
                state.rows[index].lease = nil
                return report
            }
        }
    }

    public func tokensToRevoke(_ plan: ActionPlan, keyIssuer: String) async throws -> [TokenToRevoke] { [] }

    public func fail(_ claim: ClaimedSET, error: String, retryAt: Double?, now: Double) async throws -> Bool {
        state.withLock { state in
            guard let index = state.rows.firstIndex(where: { $0.id == claim.id }), state.rows[index].state == .pending,
                state.rows[index].lease?.owner == claim.owner
            else { return false }
            state.rows[index].attempts += 1
            state.rows[index].lastError = error
            state.rows[index].nextAttemptAt = retryAt ?? now
            state.rows[index].state = retryAt == nil ? .dead : .pending
            state.rows[index].lease = nil
            return true
        }
    }

    public func rescueExpiredLeases(now: Double, horizon: Double) async throws -> [String] {
        try checkAvailable()
        return state.withLock { state in
            state.rows.indices.compactMap { index in
                guard state.rows[index].state == .pending, let lease = state.rows[index].lease,
                    QueueTime.hasExpired(lease.expiresAt, now: now, horizon: horizon)
                else { return nil }
                state.rows[index].lease = nil
                return state.rows[index].jti
            }
        }
    }

    // MARK: The accounts, through AccountActions

    private static func apply(_ plan: ActionPlan, claim: ClaimedSET, tokenKey: [UInt8], to state: inout State) -> [ActionOutcome] {
        let accounts = plan.steps.map { step -> AccountActions.Account? in
            for lookup in AccountActions.lookups(for: step, keyIssuer: claim.issuer, tokenKey: tokenKey) {
                switch lookup {
                case .token(let column, let value):
                    for account in state.accounts {
                        if let token = account.tokens.first(where: { !$0.revoked && (column == .hash ? $0.hash : $0.prefixMAC) == value }) {
                            return .init(id: account.id, tokenID: token.id, accessChangedAt: account.accessChangedAt)
                        }
                    }
                    return nil
                case .subject(let issuer, let subject):
                    if let account = state.accounts.first(where: { $0.issuer == issuer && $0.subject == subject }) {
                        return .init(id: account.id, accessChangedAt: account.accessChangedAt)
                    }
                case .email(let email):
                    if let account = state.accounts.first(where: { $0.email == email }) { return .init(id: account.id, accessChangedAt: account.accessChangedAt) }
                }
            }
            return nil
        }
        let applied = state.applied
        return AccountActions.plan(plan, accounts: accounts) { applied.contains("\(claim.id)/\($0)/\($1.rawValue)") }.map { planned in
            let result = planned.result { execute($0, on: &state.accounts) }
            if planned.isNew { state.applied.insert("\(claim.id)/\(planned.eventIndex)/\(planned.action.rawValue)") }
            return planned.outcome(result)
        }
    }

    private static func execute(_ primitive: AccountActions.Primitive, on accounts: inout [Account]) -> Int {
        func changing(_ id: Int64, _ body: (inout Account) -> Int) -> Int {
            guard let index = accounts.firstIndex(where: { $0.id == id }) else { return 0 }
            return body(&accounts[index])
        }
        switch primitive {
        case .endSessions(let id, let createdBy, let googleOnly, _, let sessionID):
            return changing(id) { account in
                var n = 0
                for index in account.sessions.indices
                where account.sessions[index].endedAt == nil && account.sessions[index].createdAt <= createdBy && (!googleOnly || account.sessions[index].viaGoogle)
                    && (sessionID == nil || account.sessions[index].id == sessionID)
                {
                    account.sessions[index].endedAt = createdBy
                    n += 1
                }
                return n
            }
        case .revokeTokens(let id, let kind, _):
            return changing(id) { account in
                var n = 0
                for index in account.tokens.indices where account.tokens[index].kind == kind && !account.tokens[index].revoked {
                    account.tokens[index].revoked = true
                    n += 1
                }
                return n
            }
        case .revokeToken(let tokenID, _):
            for a in accounts.indices {
                if let t = accounts[a].tokens.firstIndex(where: { $0.id == tokenID && !$0.revoked }) {
                    accounts[a].tokens[t].revoked = true
                    return 1
                }
            }
            return 0
        case .setAccess(let id, let flag, let enabled, let eventTime):
            return changing(id) { account in
                guard OrderingRule.accessChangeApplies(eventTime: eventTime, lastAccessChange: account.accessChangedAt) else { return 0 }
                account.flags[flag] = enabled
                account.accessChangedAt = OrderingRule.accessChangeTime(after: account.accessChangedAt, eventTime: eventTime)
                return 1
            }
        case .raise(let id, let flag):
            return changing(id) { account in
                account.raised.insert(flag)
                return 1
            }
        }
    }
}
