import Foundation
import Logging
import RISCCore
import RISCTestKit
import Synchronization
import Testing

/// Issue 25: the queue worker's rules with the ports in memory (`MemoryWorkQueue`), no SQL: what
/// an event does to an account, retries with backoff, dead letters, lost leases, and the metrics
/// counted from the outcome the worker decided.
@Suite("Queue worker rules, ports in memory")
struct QueueWorkerTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let factory = SETFactory(signer: keys.entry(for: .eddsa)!.signer)

    /// What the worker reported, by kind and outcome.
    final class Counted: WorkMetrics {
        let counts = Mutex<[String: Int]>([:])
        func observeAction(outcome: EventLogRecord.Outcome, seconds: Double?) { counts.withLock { $0["action " + outcome.rawValue, default: 0] += 1 } }
        func observeNotice(outcome: EventLogRecord.Outcome, refused: Bool) { counts.withLock { $0["notice " + outcome.rawValue, default: 0] += 1 } }
        var value: [String: Int] { counts.withLock { $0 } }
    }

    static let wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    static func worker(
        _ queue: MemoryWorkQueue, owner: String = "w", pollInterval: Double? = nil, retry: RetryPolicy = RetryPolicy(), log: MemoryEventLog = MemoryEventLog(),
        metrics: Counted = Counted(), clock: TestClock? = nil
    ) -> QueueWorker {
        var retry = retry
        retry.jitter = 0
        var settings = QueueWorker.Settings(owner: owner)
        if let pollInterval { settings.pollInterval = pollInterval }
        return QueueWorker(
            queue: queue, settings: settings, retry: retry, log: log, metrics: metrics, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() },
            clock: clock?.function ?? wallClock)
    }

    @Test("issue 26 §3: an outage is logged when it starts and when it ends, not at every rescue attempt")
    func rescueOutageLoggedOnce() async throws {
        let queue = MemoryWorkQueue()
        let captured = CapturedLog()
        let worker = QueueWorker(queue: queue, settings: .init(owner: "w"), log: MemoryEventLog(), logger: captured.logger)
        queue.unavailable.withLock { $0 = true }
        for second in 0..<40 { await worker.rescue(now: 1_000 + Double(second)) }
        queue.unavailable.withLock { $0 = false }
        for second in 40..<43 { await worker.rescue(now: 1_000 + Double(second)) }
        let lines = captured.lines.withLock { $0 }
        #expect(lines.filter { $0.contains("cannot rescue expired leases") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.contains("rescuing expired leases again") }.count == 1, "\(lines)")
    }

    /// Found by stopping a receiver during a PostgreSQL outage: each worker, its claim held by the
    /// pool until the stop gave up on it, logged "cannot claim queued work; trying again" as the
    /// receiver stopped. It is stopping, not trying again.
    @Test("a claim that fails because the worker is being stopped is not reported as an outage to retry")
    func claimFailingAtStopIsNotAnOutage() async throws {
        let queue = MemoryWorkQueue()
        let captured = CapturedLog()
        let clock = TestClock()
        let worker = QueueWorker(queue: queue, settings: .init(owner: "w"), log: MemoryEventLog(), logger: captured.logger, clock: clock.function)
        queue.hanging.withLock { $0 = true }
        worker.start()
        #expect(await waitWhile { queue.claims.load(ordering: .relaxed) < 1 })
        let stopped = Task { await worker.stop(waitingAtMost: 10) }
        await clock.waitForReads(2)  // the stop is waiting on its clock
        clock.advance(11)  // it gives up waiting and cancels the claim in hand
        await stopped.value
        await worker.stop()  // again: returns once the loop has ended (the clock stands still)
        let lines = captured.lines.withLock { $0 }
        #expect(!lines.contains { $0.contains("cannot claim queued work") }, "\(lines)")
    }

    @Test("a hijacking ends the account's sessions, suspends Google sign-in and revokes linked tokens, once; the metric counts the attempt")
    func hijacking() async throws {
        let queue = MemoryWorkQueue(tokenKey: Array(repeating: 7, count: 32))
        queue.link(subject: "alice", sessions: 2, googleTokens: ["1//0g-google"], linkedTokens: ["linked-a", "linked-b"], now: 1_000)
        let token = try Self.factory.make(type: .accountDisabled, subject: Self.factory.accountSubject("alice"), extra: ["reason": "hijacking"], jti: "h", iat: 2_000)
        queue.enqueue(jti: "h", token: token, receivedAt: 2_001)
        let log = MemoryEventLog(), metrics = Counted()
        let worker = Self.worker(queue, log: log, metrics: metrics)
        #expect(try await worker.processDue(now: 3_000) == 1)
        #expect(try await worker.processDue(now: 3_001) == 0)
        let alice = try #require(queue.account("alice"))
        #expect(alice.openSessions == 0 && alice.flags[.googleSignIn] == false && alice.activeTokens(.linked) == 0 && alice.activeTokens(.googleRefresh) == 1)
        #expect(log.outcomes("applied") == ["applied"])
        let results = log.records("applied").first?["actions"]?.arrayValue?.compactMap { $0.objectValue?["result"]?.stringValue } ?? []
        #expect(results.contains("ended 2 sessions") && results.contains("revoked 2 tokens") && results.contains("google_signin_enabled = false"))
        #expect(metrics.value == ["action applied": 1])
        #expect(queue.rows.map(\.state) == [.done])
    }

    @Test("an older account-enabled arriving after a newer disable is superseded, not applied")
    func ordering() async throws {
        let queue = MemoryWorkQueue()
        queue.link(subject: "bob", sessions: 0, now: 1_000)
        let subject = Self.factory.accountSubject("bob")
        queue.enqueue(jti: "newer-disable", token: try Self.factory.make(type: .accountDisabled, subject: subject, jti: "newer-disable", iat: 2_000), receivedAt: 2_001)
        queue.enqueue(jti: "older-enable", token: try Self.factory.make(type: .accountEnabled, subject: subject, jti: "older-enable", iat: 1_500), receivedAt: 2_002)
        let log = MemoryEventLog()
        #expect(try await Self.worker(queue, log: log, metrics: Counted()).processDue(now: 3_000) == 2)
        #expect(queue.account("bob")?.flags[.googleSignIn] == false)
        let last = log.records("applied").last?["actions"]?.arrayValue?.compactMap { $0.objectValue?["result"]?.stringValue } ?? []
        #expect(last.allSatisfy { $0 == OrderingRule.superseded }, "\(last)")
    }

    @Test("a SET that cannot be acted on is retried after its backoff, then dead-lettered; each attempt counted with its outcome")
    func retries() async throws {
        let queue = MemoryWorkQueue()
        queue.enqueue(jti: "broken", token: "not.a-token", receivedAt: 3_000)
        var retry = RetryPolicy()
        retry.maximumAttempts = 3
        let log = MemoryEventLog(), metrics = Counted()
        let worker = Self.worker(queue, retry: retry, log: log, metrics: metrics)
        #expect(try await worker.processDue(now: 3_000) == 1)  // fails: next at 3_001
        #expect(try await worker.processDue(now: 3_000.9) == 0)
        #expect(try await worker.processDue(now: 3_001) == 1)  // fails: next at 3_003
        #expect(try await worker.processDue(now: 3_003) == 1)  // third: dead
        #expect(log.outcomes("applied") == ["failed", "failed", "dead_lettered"])
        #expect(metrics.value == ["action failed": 2, "action dead_lettered": 1])
        #expect(queue.rows.map(\.state) == [.dead] && queue.rows[0].attempts == 3)
    }

    @Test("a worker whose lease expired and was rescued finishes nothing: its late attempt is lease_lost, the other worker's counts")
    func leaseLost() async throws {
        let queue = MemoryWorkQueue()
        queue.link(subject: "carol", sessions: 1, now: 1_000)
        queue.enqueue(jti: "slow", token: try Self.factory.make(type: .sessionsRevoked, subject: Self.factory.accountSubject("carol"), jti: "slow", iat: 2_000), receivedAt: 2_001)
        let stalled = try await queue.claim(owner: "stalled", limit: 1, lease: 30, now: 3_000)
        #expect(try await queue.rescueExpiredLeases(now: 3_031) == ["slow"])
        let log = MemoryEventLog(), metrics = Counted()
        #expect(try await Self.worker(queue, owner: "survivor", log: log, metrics: metrics).processDue(now: 3_032) == 1)
        let claims = try SecurityEventToken(payload: CompactJWS(stalled[0].token).payload)
        #expect(try await queue.finish(stalled[0], plan: ActionPlan.plan(for: claims, table: .default, now: 3_033), claims: claims, applyToAccounts: true, now: 3_033) == nil)
        #expect(queue.account("carol")?.openSessions == 0 && queue.rows[0].attempts == 1)
        #expect(metrics.value == ["action applied": 1])
    }

    @Test("an idle worker looks for due work every poll interval of its clock, not of real time")
    func idlePollOnTheClock() async throws {
        let queue = MemoryWorkQueue(), clock = TestClock(3_000)
        let worker = Self.worker(queue, pollInterval: 3_600, clock: clock)
        worker.start()
        #expect(await waitWhile { queue.claims.load(ordering: .relaxed) < 1 })
        // Queued without waking the worker (as a row another receiver stored whose notification was lost).
        queue.enqueue(jti: "late", token: try Self.factory.make(type: .sessionsRevoked, subject: Self.factory.accountSubject("nobody"), jti: "late", iat: 2_000), receivedAt: 3_000)
        // The clock moves in steps, so whenever the worker started its wait, it ends.
        let polled = await waitWhile(every: 0.05) {
            clock.advance(600)
            return queue.rows[0].state != .done
        }
        #expect(polled, "the idle worker did not look again when its clock passed the poll interval")
        await worker.stop()
    }

    @Test("stopping gives up waiting for a worker stuck in its store after the bound of the worker's clock")
    func stopBoundOnTheClock() async throws {
        let queue = MemoryWorkQueue(), clock = TestClock(3_000)
        queue.hanging.withLock { $0 = true }
        let worker = Self.worker(queue, clock: clock)
        worker.start()
        #expect(await waitWhile { queue.claims.load(ordering: .relaxed) < 1 })
        let stopped = Atomic<Bool>(false)
        Task {
            await worker.stop(waitingAtMost: 3_600)
            stopped.store(true, ordering: .relaxed)
        }
        let gaveUp = await waitWhile(every: 0.05) {
            clock.advance(600)
            return !stopped.load(ordering: .relaxed)
        }
        #expect(gaveUp, "stop waited for real time, not for the worker's clock")
    }
}
