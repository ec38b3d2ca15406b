/// An `AccountRepository` whose every call gives up after `seconds` with `StoreError.timeout`
/// (`withDeadline`), for callers that must answer: the account API (the site's login and linking
/// servers), whose calls waited for a PostgreSQL server gone away for the pool's minute and then
/// got a bare 500, and the commands on a shared store, which waited for ever.
public struct DeadlineAccounts: AccountRepository {
    public let inner: any AccountRepository
    public let seconds: Double
    public let clock: @Sendable () -> Double

    public init(_ inner: any AccountRepository, seconds: Double, clock: @escaping @Sendable () -> Double) {
        (self.inner, self.seconds, self.clock) = (inner, seconds, clock)
    }

    private func within<T: Sendable>(_ what: String, _ body: @escaping @Sendable (any AccountRepository) async throws -> T) async throws -> T {
        try await withDeadline(seconds, what, clock: clock) { [inner] in try await body(inner) }
    }

    public func link(_ links: [AccountLink], now: Double) async throws -> [Int64] {
        try await within("linking accounts") { try await $0.link(links, now: now) }
    }

    public func add(
        to subject: String, issuer: String?, session: String?, viaGoogle: Bool, token: String?, tokenKind: TokenKind, now: Double
    ) async throws -> Bool {
        try await within("adding to an account") {
            try await $0.add(to: subject, issuer: issuer, session: session, viaGoogle: viaGoogle, token: token, tokenKind: tokenKind, now: now)
        }
    }

    public func accounts(subject: String?, after: Int64, limit: Int) async throws -> [AccountSummary] {
        try await within("reading accounts") { try await $0.accounts(subject: subject, after: after, limit: limit) }
    }

    public func unlink(subject: String, issuer: String?, notices: UnlinkNotices?, now: Double) async throws -> (accounts: Int, noticesQueued: Int) {
        try await within("unlinking an account") { try await $0.unlink(subject: subject, issuer: issuer, notices: notices, now: now) }
    }

    public func revokeLinkedTokens(
        subject: String, issuer: String?, hashes: [String]?, tokenType: String?, reason: String, notices: UnlinkNotices?, now: Double
    ) async throws -> LinkedTokenRevocation? {
        try await within("revoking linked tokens") {
            try await $0.revokeLinkedTokens(subject: subject, issuer: issuer, hashes: hashes, tokenType: tokenType, reason: reason, notices: notices, now: now)
        }
    }

    public func googleSignInSuspended(userID: String) async throws -> Bool {
        try await within("reading an account") { try await $0.googleSignInSuspended(userID: userID) }
    }
}
