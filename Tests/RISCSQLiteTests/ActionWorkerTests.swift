import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCSQL
import RISCSQLite
import RISCTestKit
import Testing

/// Each event type and reason against a seeded account store, through the real store and worker.
@Suite("Queue worker on the embedded store")
struct ActionWorkerTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
    static let vectors = try! JSONParser.parseObject(
        Array(
            try! Data(
                contentsOf: KeyDirectory.repositoryRoot()
                    .appendingPathComponent("Tests/RISCCoreTests/Vectors/synthetic-risc-sets.json"))))
    static let refreshToken = vectors["stored_refresh_token"]!.stringValue!

    final class Fixture: @unchecked Sendable {
        let directory = Scratch.root.appendingPathComponent("risc-actions-\(UUID().uuidString)").path
        let store: SQLiteEventStore
        let accounts: AccountStore
        let worker: QueueWorker
        let log: JSONLinesEventLog
        let verifier: SETVerifier

        init(retry: RetryPolicy = RetryPolicy(), table: ActionTable = .default) async throws {
            store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
            accounts = try AccountStore(directory: directory)
            log = try JSONLinesEventLog(path: directory + "/events.log")
            worker = Self.worker(directory: directory, table: table, retry: retry, log: log)
            verifier = SETVerifier(
                policy: SETPolicy(audiences: [SETFactory.defaultAudience]),
                keys: StaticKeyProvider(keys: try ActionWorkerTests.keys.jwks, issuer: SETFactory.defaultIssuer))
            // Sessions created at t=1000; events below happen at t=2000 unless said otherwise.
            _ = try await accounts.link(
                .init(
                    subject: "alice", userID: "u-alice", email: "alice@example.com", sessions: ["s1", "s2"],
                    refreshTokens: [ActionWorkerTests.refreshToken], linkedTokens: ["linked-token-a"]), now: 1_000)
            _ = try await accounts.link(.init(subject: "bob", userID: "u-bob", sessions: ["b1"], refreshTokens: ["1//0gbob-token-xyz"]), now: 1_000)
        }

        // The store's threads hold it until it is closed: without this, each test left its store
        // (and the log beside it) open, with their threads and files, until the process ended.
        deinit {
            store.close()
            log.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        @discardableResult
        func deliver(_ type: EventType, subject: JSONValue?, extra: JSONObject = [:], iat: Double = 2_000, jti: String = UUID().uuidString) async throws -> AppendOutcome {
            try await store.append(
                try await ActionWorkerTests.factory.storedRecord(
                    type: type, subject: subject, extra: extra, jti: jti, iat: iat, keys: try ActionWorkerTests.keys.jwks))
        }

        /// The queue's worker on the data directory: the receiver's own, driven by hand.
        static func worker(directory: String, table: ActionTable = .default, retry: RetryPolicy = RetryPolicy(), batch: Int = 100, log: any EventLog) -> QueueWorker {
            var settings = QueueWorker.Settings(owner: "test")
            settings.batch = batch
            return QueueWorker(
                queue: try! EmbeddedWorkQueue(directory: directory), settings: settings, table: table, retry: retry, log: log, logger: Logger(label: "t"))
        }

        func account(_ subject: String) async throws -> AccountSummary { try await accounts.accounts(subject: subject)[0] }

        func process() async throws { try await worker.processDue(now: 3_000) }

        var logLines: [JSONObject] {
            log.settle()
            let text = (try? String(contentsOfFile: directory + "/events.log", encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONParser.parseObject(Array($0.utf8)) }
        }
    }

    static func user(_ sub: String) -> JSONValue { factory.accountSubject(sub) }

    @Test("sessions-revoked ends the sessions opened before the event, not a newer one")
    func sessionsRevoked() async throws {
        let f = try await Fixture()
        _ = try await f.accounts.link(.init(subject: "alice", userID: "u-alice", sessions: ["after"]), now: 2_500)
        try await f.deliver(.sessionsRevoked, subject: Self.user("alice"))
        try await f.process()
        let alice = try await f.account("alice")
        #expect(alice.endedSessions == 2 && alice.openSessions == 1)
        #expect(try await f.account("bob").openSessions == 1)
        #expect(try f.store.queueDepth() == 0)
    }

    @Test("tokens-revoked ends Google sessions and revokes the stored Google tokens, not linked ones")
    func tokensRevoked() async throws {
        let f = try await Fixture()
        try await f.deliver(.tokensRevoked, subject: Self.user("alice"))
        try await f.process()
        let alice = try await f.account("alice")
        #expect(alice.openSessions == 0)
        #expect(alice.revokedTokens == 1 && alice.activeTokens == 1)
    }

    @Test("token-revoked finds the token by prefix and by double hash", arguments: [OAuthTokenIdentifier.Algorithm.prefix, .hashSHA512SHA512])
    func tokenRevoked(algorithm: OAuthTokenIdentifier.Algorithm) async throws {
        let f = try await Fixture()
        try await f.deliver(.tokenRevoked, subject: SETFactory.tokenSubject(refreshToken: Self.refreshToken, algorithm: algorithm))
        try await f.process()
        #expect(try await f.account("alice").revokedTokens == 1)
        #expect(try await f.account("bob").revokedTokens == 0)
        let line = try #require(f.logLines.first { $0["step"] == "applied" })
        #expect(line["outcome"] == "applied")
        #expect(!(f.logLines.map { JSONValue.object($0).serialized }.joined()).contains(Self.refreshToken))
    }

    @Test("account-disabled: hijacking, bulk-account, and no reason")
    func accountDisabled() async throws {
        let f = try await Fixture()
        try await f.deliver(.accountDisabled, subject: Self.user("alice"), extra: ["reason": "hijacking"])
        try await f.deliver(.accountDisabled, subject: Self.user("bob"), extra: ["reason": "bulk-account"])
        try await f.process()
        var alice = try await f.account("alice")
        #expect(alice.openSessions == 0 && !alice.googleSignInEnabled && alice.emailRecoveryEnabled)
        let bob = try await f.account("bob")
        #expect(bob.flaggedForReview && bob.googleSignInEnabled && bob.openSessions == 1)
        try await f.deliver(.accountDisabled, subject: Self.user("alice"), iat: 2_100)
        try await f.process()
        alice = try await f.account("alice")
        #expect(!alice.googleSignInEnabled && !alice.emailRecoveryEnabled)
    }

    @Test("issue 15: a hijacked or purged Google account's linked-account tokens are revoked by default; its Google refresh token is left to tokens-revoked")
    func linkedTokensRevoked() async throws {
        let f = try await Fixture()
        try await f.deliver(.accountDisabled, subject: Self.user("alice"), extra: ["reason": "hijacking"])
        try await f.process()
        let alice = try await f.account("alice")
        #expect(alice.linkedTokens == .init(active: 0, revoked: 1), "the linked token is still active after a hijacking")
        #expect(alice.googleRefreshTokens == .init(active: 1, revoked: 0))
        let results = f.logLines.first { $0["step"] == "applied" }?["actions"]?.arrayValue?.compactMap { $0.objectValue } ?? []
        #expect(results.contains { $0["action"] == "revoke_linked_tokens" && $0["result"] == "revoked 1 token" }, "\(results)")
        // account-purged (RISC 1.0; Google does not document sending it): the Google identity is gone.
        _ = try await f.accounts.add(to: "bob", session: nil, token: "linked-token-b", tokenKind: .linked, now: 1_000)
        try await f.deliver(.accountPurged, subject: Self.user("bob"))
        try await f.process()
        let bob = try await f.account("bob")
        #expect(bob.linkedTokens == .init(active: 0, revoked: 1) && bob.googleRefreshTokens == .init(active: 0, revoked: 1))
        #expect(bob.openSessions == 0 && !bob.googleSignInEnabled && !bob.emailRecoveryEnabled)
    }

    /// Found: RISC 1.0's identifier-recycled (the address now belongs to someone else; whether
    /// Google sends it is undocumented, spec §9 question 13) was log_only, leaving recovery by
    /// email open to the address's new owner.
    @Test("identifier-recycled suspends recovery through the address; identifier-changed only logs")
    func identifierRecycled() async throws {
        let f = try await Fixture()
        try await f.deliver(.identifierRecycled, subject: ["subject_type": "email", "email": "Alice@Example.com"])
        try await f.deliver(.identifierChanged, subject: Self.user("bob"))
        try await f.process()
        let alice = try await f.account("alice")
        #expect(!alice.emailRecoveryEnabled && alice.googleSignInEnabled && alice.openSessions == 2)
        let bob = try await f.account("bob")
        #expect(bob.emailRecoveryEnabled && bob.googleSignInEnabled && !bob.flaggedForReview)
    }

    @Test("account-enabled restores; an older account-enabled arriving late does not undo a newer disable")
    func ordering() async throws {
        let f = try await Fixture()
        try await f.deliver(.accountDisabled, subject: Self.user("alice"), iat: 2_000)
        try await f.deliver(.accountEnabled, subject: Self.user("alice"), iat: 1_500)  // older, arrives late
        try await f.process()
        var alice = try await f.account("alice")
        #expect(!alice.googleSignInEnabled && !alice.emailRecoveryEnabled)
        #expect(f.logLines.contains { JSONValue.object($0).serialized.contains("superseded") })
        try await f.deliver(.accountEnabled, subject: Self.user("alice"), iat: 2_500)
        try await f.process()
        alice = try await f.account("alice")
        #expect(alice.googleSignInEnabled && alice.emailRecoveryEnabled)
    }

    @Test("credential change, verification, unknown types, unknown subjects, legacy aliases")
    func others() async throws {
        let f = try await Fixture()
        try await f.deliver(.accountCredentialChangeRequired, subject: Self.user("bob"))
        try await f.deliver(.verification, subject: nil, extra: ["state": "state-123"])
        try await f.deliver(EventType("https://example.com/event/new"), subject: Self.user("bob"))
        try await f.deliver(.sessionsRevoked, subject: Self.user("stranger"))
        try await f.deliver(EventType("https://accounts.google.com/risc/event/sessions-revoked"), subject: Self.user("bob"))
        try await f.process()
        let bob = try await f.account("bob")
        #expect(bob.heightenedMonitoring && bob.openSessions == 0)
        let text = f.logLines.map { JSONValue.object($0).serialized }.joined(separator: "\n")
        #expect(text.contains("state 'state-123'"))
        #expect(text.contains("unknown subject: no-op"))
        #expect(text.contains("log_only"))
        #expect(try f.store.queueDepth() == 0)
    }

    @Test("a duplicate delivery is applied once; processing again does nothing")
    func idempotent() async throws {
        let f = try await Fixture()
        #expect(try await f.deliver(.sessionsRevoked, subject: Self.user("alice"), jti: "same") == .accepted(id: 1))
        try await f.process()
        #expect(try await f.deliver(.sessionsRevoked, subject: Self.user("alice"), jti: "same") == .duplicate(id: 1, deliveries: 2))
        try await f.process()
        #expect(f.logLines.filter { $0["step"] == "applied" }.count == 1)
    }

    /// A fixture holding one stored SET (jti `broken`, received at 3000) whose token cannot be
    /// read back, so every attempt fails; no jitter.
    static func failingSET(_ policy: RetryPolicy) async throws -> Fixture {
        var retry = policy
        retry.jitter = 0
        let f = try await Fixture(retry: retry)
        let token = try Self.factory.make(type: .sessionsRevoked, subject: Self.user("alice"), jti: "broken")
        let validated = try await f.verifier.verify(Array(token.utf8), now: 3_000)
        _ = try await f.store.append(SETRecord(validated: validated, token: "not.a-token", receivedAt: 3_000, remoteAddress: nil, contentType: nil))
        return f
    }

    @Test("a SET whose actions fail is retried with backoff, then dead-lettered, never dropped")
    func deadLetter() async throws {
        var retry = RetryPolicy()
        retry.maximumAttempts = 3
        let f = try await Self.failingSET(retry)
        try await f.worker.processDue(now: 3_000)
        try await f.worker.processDue(now: 3_000.5)  // not due yet: 1 s backoff
        try await f.worker.processDue(now: 3_001.1)
        try await f.worker.processDue(now: 3_003.2)
        let outcomes = f.logLines.filter { $0["step"] == "applied" }.map { $0["outcome"]?.stringValue ?? "" }
        #expect(outcomes == ["failed", "failed", "dead_lettered"])
        #expect(try f.store.record(issuer: "https://accounts.google.com", jti: "broken")?.state == "dead")
        #expect(try f.store.count() == 1)
    }

    /// Issue 16: the give-up point is time since receipt, and an operator's requeue starts a new window.
    @Test("failures dead-letter only once the retry window has passed; a requeued dead letter gets a new window")
    func retryWindow() async throws {
        var retry = RetryPolicy()
        retry.window = 600
        let f = try await Self.failingSET(retry)
        // Ten failures in the first ten minutes (the old default dead-lettered at the tenth): still retrying.
        for k in 0..<10 { try await f.worker.processDue(now: 3_000 + (k == 0 ? 0 : pow(2, Double(k)) - 1 + 0.1 * Double(k))) }
        var outcomes = f.logLines.filter { $0["step"] == "applied" }.map { $0["outcome"]?.stringValue ?? "" }
        #expect(outcomes.count == 10 && !outcomes.contains("dead_lettered"), "\(outcomes)")
        #expect(try f.store.record(issuer: "https://accounts.google.com", jti: "broken")?.state == "pending")
        // The attempt when the window closes fails: now it is a dead letter.
        try await f.worker.processDue(now: 3_600.5)
        outcomes = f.logLines.filter { $0["step"] == "applied" }.map { $0["outcome"]?.stringValue ?? "" }
        #expect(outcomes.last == "dead_lettered")
        let admin = try SQLiteStore.queueAdmin(directory: f.directory)
        #expect(try await admin.counts(now: 3_600).lastDeadError?.jti == "broken")
        // Requeued (the window restarts at the real now): a failure is retried again, not dead at once.
        #expect(try await admin.retry(jti: nil) == 1)
        let real = Date().timeIntervalSince1970
        try await f.worker.processDue(now: real + 1)
        #expect(f.logLines.filter { $0["step"] == "applied" }.last?["outcome"] == "failed")
        let counts = try await admin.counts(now: real + 1)
        #expect(counts.scheduledRetry == 1 && counts.lastRetryError?.jti == "broken" && counts.lastRetryError?.error.isEmpty == false)
    }

    @Test("an operator's table override changes what an event does")
    func override() async throws {
        var table = ActionTable.default
        table.set(.accountDisabled, reason: "hijacking", actions: [.endSessions, .suspendGoogleSignIn, .suspendEmailRecovery, .flagForReview])
        let f = try await Fixture(table: table)
        try await f.deliver(.accountDisabled, subject: Self.user("alice"), extra: ["reason": "hijacking"])
        try await f.process()
        let alice = try await f.account("alice")
        #expect(!alice.googleSignInEnabled && !alice.emailRecoveryEnabled && alice.flaggedForReview && alice.openSessions == 0)
    }

    @Test("a restart in the middle of a backlog resumes where it stopped, applying each SET once")
    func restartResumes() async throws {
        let f = try await Fixture()
        for index in 0..<40 {
            try await f.deliver(index % 2 == 0 ? .sessionsRevoked : .accountCredentialChangeRequired, subject: Self.user(index % 4 < 2 ? "alice" : "bob"))
        }
        try await Fixture.worker(directory: f.directory, batch: 15, log: f.log).processDue(now: 3_000)  // part of the backlog, then "crash"
        #expect(try f.store.queueDepth() == 25)
        f.store.close()
        let worker = Fixture.worker(directory: f.directory, batch: 10, log: f.log)
        while try await worker.processDue(now: 3_000) > 0 {}
        #expect(try f.store.queueDepth() == 0)
        #expect(try await f.account("alice").openSessions == 0)
        #expect(try await f.account("bob").heightenedMonitoring)
        #expect(f.logLines.filter { $0["step"] == "applied" && $0["outcome"] == "applied" }.count == 40)
    }

    @Test("the worker thread applies events as they are committed")
    func background() async throws {
        let f = try await Fixture()
        let worker = f.worker
        f.store.afterCommit = { worker.wake() }
        f.worker.start()
        try await f.deliver(.sessionsRevoked, subject: Self.user("bob"))
        _ = try await waitWhile { try f.store.queueDepth() > 0 }
        await f.worker.stop()
        #expect(try await f.account("bob").openSessions == 0)
    }
}
