import Foundation

/// What `risc accounts link`, the import and the admin API register: a Google account (issuer +
/// `sub`) → the site's user, with sessions and tokens (kept only as `TokenFingerprint`s).
public struct AccountLink: Sendable {
    public var issuer: String
    public var subject: String
    public var userID: String
    public var email: String?
    public var sessions: [String]
    /// When sessions began (seconds since 1970), for those given with a `created_at`; the others,
    /// and any start after the link, begin at the link. "End sessions" spares a session begun
    /// after the event, so a session imported or linked late must say when it began.
    public var sessionStarts: [String: Double]
    public var refreshTokens: [String]
    public var linkedTokens: [String]

    public init(
        issuer: String = "https://accounts.google.com", subject: String, userID: String, email: String? = nil,
        sessions: [String] = [], sessionStarts: [String: Double] = [:], refreshTokens: [String] = [], linkedTokens: [String] = []
    ) {
        self.issuer = issuer
        self.subject = subject
        self.userID = userID
        self.email = email
        self.sessions = sessions
        self.sessionStarts = sessionStarts
        self.refreshTokens = refreshTokens
        self.linkedTokens = linkedTokens
    }

    /// When `session` began, for a link made at `now`.
    public func start(of session: String, now: Double) -> Double { min(sessionStarts[session] ?? now, now) }
}

/// The kinds of token a linked account holds.
public enum TokenKind: String, Sendable, CaseIterable {
    /// A Google refresh token the site holds.
    case googleRefresh = "google_refresh"
    /// A token the site issued to Google through account linking.
    case linked
}

/// One account as `risc accounts show` and the admin API print it.
public struct AccountSummary: Sendable, Equatable {
    public let id: Int64
    public let issuer: String
    public let subject: String
    public let userID: String
    public let email: String?
    public let googleSignInEnabled: Bool
    public let emailRecoveryEnabled: Bool
    public let flaggedForReview: Bool
    public let heightenedMonitoring: Bool
    public let openSessions: Int
    public let endedSessions: Int
    /// Token fingerprints by kind: Google refresh tokens the site holds, and linked-account
    /// tokens the site issued to Google.
    public let googleRefreshTokens: TokenCounts
    public let linkedTokens: TokenCounts

    /// Active and revoked tokens of one kind.
    public struct TokenCounts: Sendable, Equatable {
        public var active: Int
        public var revoked: Int

        public init(active: Int, revoked: Int) {
            self.active = active
            self.revoked = revoked
        }

        var json: JSONValue { ["active": .number(Double(active)), "revoked": .number(Double(revoked))] }
    }

    /// Every kind together.
    public var activeTokens: Int { googleRefreshTokens.active + linkedTokens.active }
    public var revokedTokens: Int { googleRefreshTokens.revoked + linkedTokens.revoked }

    public init(
        id: Int64, issuer: String, subject: String, userID: String, email: String?, googleSignInEnabled: Bool,
        emailRecoveryEnabled: Bool, flaggedForReview: Bool, heightenedMonitoring: Bool, openSessions: Int, endedSessions: Int,
        googleRefreshTokens: TokenCounts, linkedTokens: TokenCounts
    ) {
        self.id = id
        self.issuer = issuer
        self.subject = subject
        self.userID = userID
        self.email = email
        self.googleSignInEnabled = googleSignInEnabled
        self.emailRecoveryEnabled = emailRecoveryEnabled
        self.flaggedForReview = flaggedForReview
        self.heightenedMonitoring = heightenedMonitoring
        self.openSessions = openSessions
        self.endedSessions = endedSessions
        self.googleRefreshTokens = googleRefreshTokens
        self.linkedTokens = linkedTokens
    }

    public var json: JSONValue {
        var object = JSONObject()
        object["issuer"] = .string(issuer)
        object["subject"] = .string(subject)
        object["user_id"] = .string(userID)
        if let email { object["email"] = .string(email) }
        object["google_signin_enabled"] = .bool(googleSignInEnabled)
        object["email_recovery_enabled"] = .bool(emailRecoveryEnabled)
        object["flagged_for_review"] = .bool(flaggedForReview)
        object["heightened_monitoring"] = .bool(heightenedMonitoring)
        object["sessions"] = ["open": .number(Double(openSessions)), "ended": .number(Double(endedSessions))]
        object["tokens"] = [TokenKind.googleRefresh.rawValue: googleRefreshTokens.json, TokenKind.linked.rawValue: linkedTokens.json]
        return .object(object)
    }
}

extension AccountRepository {
    /// Every account, optionally only those with `subject`, in creation order.
    public func accounts(subject: String?) async throws -> [AccountSummary] { try await accounts(subject: subject, after: 0, limit: .max) }
}

/// The linked-account store, whichever backend holds it. Applying actions to it happens when a
/// queued SET is finished (`WorkQueue.finish`), in the same transaction.
public protocol AccountRepository: Sendable {
    /// Creates or updates each account and adds its sessions and tokens, all in one transaction
    /// (all or none). Returns the account ids, in order.
    func link(_ links: [AccountLink], now: Double) async throws -> [Int64]
    /// Adds a session and/or a token to an existing account (by subject, and issuer when given).
    /// False when there is no such account.
    func add(to subject: String, issuer: String?, session: String?, viaGoogle: Bool, token: String?, tokenKind: TokenKind, now: Double)
        async throws -> Bool
    /// Accounts, optionally only those with `subject`, in creation order: after the account whose
    /// id is `after` (0: from the first), at most `limit` of them (a page: `risc accounts list`
    /// pages through a million accounts with the memory of one page).
    func accounts(subject: String?, after: Int64, limit: Int) async throws -> [AccountSummary]
    /// Removes the account (by subject, and issuer when given) with its sessions and token
    /// fingerprints; with `notices`, first queues an unlink notice (`UnlinkNotices`) for each of its
    /// active linked tokens, in the same transaction. How many accounts it removed (0: none such),
    /// and how many notices it queued.
    func unlink(subject: String, issuer: String?, notices: UnlinkNotices?, now: Double) async throws -> (accounts: Int, noticesQueued: Int)
    /// The site revoked linked tokens on its own side: marks the account's active linked tokens
    /// revoked (all, or those whose fingerprints `hashes` names) with `reason`, and with `notices`
    /// queues an unlink notice for each, in one transaction. nil when there is no such account.
    func revokeLinkedTokens(
        subject: String, issuer: String?, hashes: [String]?, tokenType: String?, reason: String, notices: UnlinkNotices?, now: Double
    ) async throws -> LinkedTokenRevocation?
    /// Whether risc suspended Google sign-in for any account of the site's user `userID` (after
    /// a hijacking or a disabled Google account): such an account must not be relinked.
    func googleSignInSuspended(userID: String) async throws -> Bool
}

extension AccountRepository {
    /// Creates or updates one account. Returns its id.
    public func link(_ link: AccountLink, now: Double) async throws -> Int64 {
        guard let id = try await self.link([link], now: now).first else { throw AccountLinkError() }
        return id
    }

    /// Creates or updates one account, as `link(_:now:)` does; the site user it was linked to
    /// before when this link moves it to another (nil: a new link, or the same user), so that the
    /// caller says so and logs it (`EventLogRecord.Outcome.relinked`).
    public func linkReportingMove(_ link: AccountLink, now: Double) async throws -> String? {
        let scope = SETPolicy.issuerScope(link.issuer)
        let before = try await accounts(subject: link.subject).first { $0.issuer == scope }?.userID
        _ = try await self.link(link, now: now)
        return before == link.userID ? nil : before
    }

    /// Removes the account without notices. How many accounts went.
    public func unlink(subject: String, issuer: String?) async throws -> Int {
        try await unlink(subject: subject, issuer: issuer, notices: nil, now: systemNow()).accounts
    }
}

/// Records and reads `risc stream verify`'s round trips, whichever backend holds them.
public protocol VerificationRequests: Sendable {
    /// Records that a verification carrying `state` was requested.
    func request(state: String, apiBase: String, now: Double) async throws
    /// The request for `state`, and what answered it, if anything.
    func entry(state: String) async throws -> VerificationEntry?
    /// SETs received since `time`: how many, and how many of them were verification events.
    func received(since time: Double) async throws -> (all: Int, verifications: Int)
}

/// A requested verification and, once it came back, what it came back as.
public struct VerificationEntry: Sendable {
    public let state: String
    public let requestedAt: Double
    public let matchedAt: Double?
    public let tokenID: String?
    public let keyID: String?
    public let algorithm: String?
    public let issuer: String?
    public let audience: String?

    public init(
        state: String, requestedAt: Double, matchedAt: Double?, tokenID: String?, keyID: String?, algorithm: String?, issuer: String?,
        audience: String?
    ) {
        self.state = state
        self.requestedAt = requestedAt
        self.matchedAt = matchedAt
        self.tokenID = tokenID
        self.keyID = keyID
        self.algorithm = algorithm
        self.issuer = issuer
        self.audience = audience
    }
}

/// An account link that cannot be made: a malformed description, or a backend that returned no id.
public struct AccountLinkError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String = "the store returned no account id") { self.description = description }
}

extension AccountLink {
    /// The members an account's JSON description may have (`accounts import`, `POST /admin/accounts`).
    public static let jsonMembers: Set<String> = ["subject", "user_id", "email", "issuer", "sessions", "refresh_tokens", "linked_tokens"]

    /// A subject, user ID, email or issuer as given (a JSON member, `risc accounts link`'s option):
    /// not empty, no NUL, no white space before or after. A subject pasted with a space or a
    /// newline would be kept as given, and no SET names it: the account would go unprotected.
    public static func check(_ text: String, named name: String) throws(AccountLinkError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw AccountLinkError("\(name) must not be empty") }
        guard !text.utf8.contains(0) else { throw AccountLinkError("\(name) must not hold a NUL character") }
        guard trimmed == text else { throw AccountLinkError("\(name) must not begin or end with white space") }
    }

    /// When a session began, from its `created_at` (nil: not given): seconds since 1970, no later
    /// than a few minutes past `now` (further ahead is milliseconds or a mistake).
    public static func sessionStart(_ value: JSONValue?, now: Double) throws(AccountLinkError) -> Double? {
        guard let value, value != .null else { return nil }
        guard case .number(let seconds) = value else { throw AccountLinkError("'created_at' must be a number (seconds since 1970)") }
        guard seconds >= 0, seconds <= now + 300 else {
            throw AccountLinkError("'created_at' must be seconds since 1970, not in the future (milliseconds are not seconds)")
        }
        return seconds
    }

    /// An account from its JSON description, strictly: `subject` and `user_id` non-empty strings,
    /// `email` and `issuer` non-empty strings when present, the token lists arrays of non-empty
    /// strings, each session its id or `{"id", "created_at"?}`, and no other member (a misspelt key
    /// must not silently drop data). `now`: the time the link is made.
    public init(json: JSONObject, now: Double) throws(AccountLinkError) {
        if let unknown = json.keys.filter({ !Self.jsonMembers.contains($0) }).sorted().first {
            throw AccountLinkError("unknown member '\(Printable.safe(unknown, maxBytes: 64))' (known: \(Self.jsonMembers.sorted().joined(separator: ", ")))")
        }
        func text(_ name: String, required: Bool) throws(AccountLinkError) -> String? {
            guard let value = json[name], value != .null else {
                if required { throw AccountLinkError("'\(name)' is required") }
                return nil
            }
            guard let text = value.stringValue else { throw AccountLinkError("'\(name)' must be a string") }
            try Self.check(text, named: "'\(name)'")
            return text
        }
        func list(_ name: String) throws(AccountLinkError) -> [String] {
            guard let value = json[name], value != .null else { return [] }
            guard let items = value.arrayValue else { throw AccountLinkError("'\(name)' must be an array of strings") }
            let texts = items.compactMap(\.stringValue)
            guard texts.count == items.count, !texts.contains(where: \.isEmpty) else {
                throw AccountLinkError("'\(name)' must be an array of non-empty strings")
            }
            guard !value.containsNUL else { throw AccountLinkError("'\(name)' must not hold a NUL character") }
            return texts
        }
        var sessions: [String] = [], starts: [String: Double] = [:]
        let given = json["sessions"] ?? .null
        guard given == .null || given.arrayValue != nil else { throw AccountLinkError("'sessions' must be an array of session ids or objects") }
        for session in given.arrayValue ?? [] {
            guard case .object(let object) = session else {
                guard let id = session.stringValue, !id.isEmpty else {
                    throw AccountLinkError("'sessions' must be an array of non-empty strings or session objects ({\"id\", \"created_at\"})")
                }
                sessions.append(id)
                continue
            }
            if let unknown = object.keys.filter({ $0 != "id" && $0 != "created_at" }).sorted().first {
                throw AccountLinkError("unknown member '\(Printable.safe(unknown, maxBytes: 64))' in a session (known: created_at, id)")
            }
            guard let id = object["id"]?.stringValue, !id.isEmpty else { throw AccountLinkError("'sessions': an object needs 'id', a non-empty string") }
            sessions.append(id)
            starts[id] = try Self.sessionStart(object["created_at"], now: now)
        }
        guard !(json["sessions"]?.containsNUL ?? false) else { throw AccountLinkError("'sessions' must not hold a NUL character") }
        self.init(
            issuer: try text("issuer", required: false) ?? "https://accounts.google.com", subject: try text("subject", required: true)!,
            userID: try text("user_id", required: true)!, email: try text("email", required: false), sessions: sessions, sessionStarts: starts,
            refreshTokens: try list("refresh_tokens"), linkedTokens: try list("linked_tokens"))
    }
}
