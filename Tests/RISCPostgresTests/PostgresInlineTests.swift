import Foundation
import Logging
import RISCCore
import RISCPostgres
import RISCTestKit
import Synchronization
import Testing

/// The shared store applies a SET's actions in the transaction that stores it (no webhook), one
/// statement for a batch about no account of the store's, a transaction for the others; what
/// fails there is stored pending for the workers. The workers finish their claims a batch per
/// transaction.
@Suite("PostgreSQL inline actions and batched finishes", .serialized)
struct PostgresInlineTests {
    typealias Q = PostgresQueueTests
    static let logger = PostgresFoundationTests.logger

    /// Appends every record at once (so that they share batches) and returns each one's outcome and
    /// event-log lines, in order.
    static func appendAll(_ records: [SETRecord], to store: SharedStore) async throws -> [(AppendOutcome, [EventLogRecord])] {
        try await withThrowingTaskGroup(of: (Int, AppendOutcome, [EventLogRecord]).self) { group in
            for (index, record) in records.enumerated() {
                group.addTask {
                    let (outcome, lines) = try await store.events.appendReporting(record)
                    return (index, outcome, lines)
                }
            }
            var results: [(Int, AppendOutcome, [EventLogRecord])] = []
            for try await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
        }
    }

    static func record(_ type: EventType, _ sub: String, jti: String, extra: JSONObject = [:]) async throws -> SETRecord {
        try await Q.factory.storedRecord(
            type: type, subject: Q.user(sub), extra: extra, jti: jti, iat: 2_000, keys: try Q.keys.jwks, receivedAt: Date().timeIntervalSince1970)
    }

    static func results(_ lines: [EventLogRecord]) -> [String] {
        lines.first { $0.fields["step"]?.stringValue == "applied" }?.fields["actions"]?.arrayValue?.compactMap {
            $0.objectValue?["result"]?.stringValue
        } ?? []
    }

    /// Found with the queue's: an inline action the server refused was logged (its `deferred`
    /// line) as PostgresNIO's "Generic description to prevent accidental leakage".
    @Test("an inline action the server refuses: the SET deferred to the queue, its line in the server's words")
    func refusedInlineInItsWords() async throws {
        let f = try await Q.Fixture(receivers: 1)
        let store = f.stores[0]
        store.enableInlineActions(table: .default)
        _ = try await store.accounts.link(AccountLink(subject: "frank", userID: "u-frank", sessions: ["f1"]), now: 1_000)
        try await f.cluster.psql("ALTER TABLE sessions RENAME COLUMN ended_at TO ended_at_renamed")
        let results = try await Self.appendAll([try await Self.record(.sessionsRevoked, "frank", jti: "inline-refused")], to: store)
        let deferred = results.first?.1.first { $0.fields["outcome"]?.stringValue == "deferred" }
        let error = deferred?.fields["error"]?.stringValue ?? ""
        #expect(error.contains(#"PostgreSQL said: column "ended_at" does not exist (SQLSTATE 42703)"#), "\(results.map(\.1))")
        #expect(try await f.cluster.psql("SELECT state FROM sets WHERE jti = 'inline-refused'") == "pending")
        try await f.close()
    }

    @Test("SETs about strangers, about accounts of the store's, a verification and a duplicate, stored at once: each applied once as it arrives, stored done, nothing queued")
    func inlineMixedBatches() async throws {
        let f = try await Q.Fixture(receivers: 1)
        let store = f.stores[0]
        store.enableInlineActions(table: .default)
        for index in 0..<10 {
            _ = try await store.accounts.link(AccountLink(subject: "known-\(index)", userID: "u\(index)", sessions: ["a", "b"]), now: 1_000)
        }
        var records: [SETRecord] = []
        for index in 0..<40 {
            let sub = index % 4 == 0 ? "known-\(index / 4)" : "stranger-\(index)"
            records.append(try await Self.record(.sessionsRevoked, sub, jti: "mixed-\(index)"))
        }
        records.append(try await Self.record(.verification, "nobody", jti: "verify-1", extra: ["state": "st-1"]))
        records.append(records[1])  // a redelivery in the same burst
        let results = try await Self.appendAll(records, to: store)
        for (index, (outcome, lines)) in results.enumerated() where index < 40 {
            guard case .accepted = outcome else {
                Issue.record("mixed-\(index): \(outcome)")
                continue
            }
            #expect(Self.results(lines) == [index % 4 == 0 ? "ended 2 sessions" : ActionOutcome.unknownSubject], "mixed-\(index)")
        }
        #expect(results[40].1.contains { $0.fields["step"]?.stringValue == "verification" })
        let duplicates = results.filter { if case .duplicate = $0.0 { true } else { false } }
        #expect(duplicates.count == 1 && duplicates[0].1.isEmpty)
        #expect(try await f.cluster.psql("SELECT count(*) FROM sets WHERE state = 'done' AND attempts = 1 AND processed_at IS NOT NULL") == "41")
        #expect(try await f.cluster.psql("SELECT deliveries FROM sets WHERE jti = 'mixed-1'") == "2")
        let applied = try await f.cluster.psql("SELECT string_agg(action, ',') FROM applied_actions a JOIN sets s ON s.id = a.set_id WHERE s.jti = 'verify-1'")
        #expect(applied == "record_verification")
        #expect(try await f.cluster.psql("SELECT count(*) FROM applied_actions") == "41")
        #expect(try await f.cluster.psql("SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL") == "20")
        // Nothing left for a worker.
        #expect(try await store.queue.claim(owner: "w", limit: 100, lease: 30, now: Date().timeIntervalSince1970 + 1).isEmpty)
        try await f.close()
    }

    @Test("an action that fails inline: only its SET is stored pending (the others of its batch applied), a worker retries it, and applies it once the fault is gone")
    func inlineFailureDeferred() async throws {
        let f = try await Q.Fixture(receivers: 1)
        let store = f.stores[0]
        store.enableInlineActions(table: .default)
        for sub in ["fine-1", "fine-2", "broken"] {
            _ = try await store.accounts.link(AccountLink(subject: sub, userID: "u-" + sub, sessions: [sub == "broken" ? "boom" : "s"]), now: 1_000)
        }
        try await f.cluster.psql(
            """
            CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.session_id = 'boom' THEN RAISE EXCEPTION 'session boom cannot end'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER refuse_boom BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse_boom();
            """)
        var records: [SETRecord] = []
        for sub in ["fine-1", "broken", "fine-2"] { records.append(try await Self.record(.sessionsRevoked, sub, jti: "j-" + sub)) }
        for index in 0..<12 { records.append(try await Self.record(.sessionsRevoked, "stranger-\(index)", jti: "s-\(index)")) }
        let results = try await Self.appendAll(records, to: store)
        #expect(results.allSatisfy { if case .accepted = $0.0 { true } else { false } })
        let deferred = results[1].1.first { $0.fields["step"]?.stringValue == "applied" }
        #expect(deferred?.fields["outcome"]?.stringValue == "deferred")
        #expect(deferred?.fields["error"]?.stringValue?.isEmpty == false)
        #expect(Self.results(results[0].1) == ["ended 1 session"] && Self.results(results[2].1) == ["ended 1 session"])
        #expect(try await f.cluster.psql("SELECT jti || ' ' || state || ' ' || attempts FROM sets WHERE state <> 'done'") == "j-broken pending 0")
        #expect(try await f.cluster.psql("SELECT count(*) FROM applied_actions a JOIN sets s ON s.id = a.set_id WHERE s.jti = 'j-broken'") == "0")

        var retry = RetryPolicy()
        retry.jitter = 0
        let log = Q.MemoryLog()
        let worker = QueueWorker(queue: store.queue, settings: .init(owner: "w"), retry: retry, log: log, logger: Self.logger)
        let now = Date().timeIntervalSince1970 + 1
        #expect(try await worker.processDue(now: now) == 1)
        #expect(log.outcomes("applied") == ["failed"])
        try await f.cluster.psql("DROP TRIGGER refuse_boom ON sessions")
        #expect(try await worker.processDue(now: now + 3_600) == 1)
        #expect(log.outcomes("applied") == ["failed", "applied"])
        #expect(try await f.cluster.psql("SELECT count(*) FROM sets WHERE state = 'done'") == "15")
        #expect(try await f.cluster.psql("SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL") == "3")
        try await f.close()
    }

    @Test("with a webhook (no inline actions) SETs are stored pending and the workers are told at COMMIT")
    func pendingWithoutInline() async throws {
        let f = try await Q.Fixture(receivers: 2)
        let woken = Mutex(0)
        let listener = Task { await f.stores[1].queue.listen { woken.withLock { $0 += 1 } } }
        defer { listener.cancel() }
        try await Task.sleep(for: .milliseconds(500))  // LISTEN in place
        let results = try await Self.appendAll(
            try await (0..<5).asyncMap { try await Self.record(.sessionsRevoked, "someone", jti: "p-\($0)") }, to: f.stores[0])
        #expect(results.allSatisfy { if case .accepted = $0.0 { $0.1.isEmpty } else { false } })
        #expect(try await f.cluster.psql("SELECT count(*) FROM sets WHERE state = 'pending' AND attempts = 0 AND processed_at IS NULL") == "5")
        #expect(try await f.cluster.psql("SELECT count(*) FROM applied_actions") == "0")
        _ = await waitWhile { woken.withLock({ $0 }) == 0 }
        #expect(woken.withLock { $0 } >= 1, "no notification reached the other receiver")
        try await f.close()
    }

    @Test("a batch of claims finished in one transaction: a claim that lost its lease meanwhile is left alone, the others finished")
    func batchedFinish() async throws {
        let f = try await Q.Fixture(receivers: 2)
        for index in 0..<3 {
            _ = try await f.stores[0].accounts.link(AccountLink(subject: "b-\(index)", userID: "u\(index)", sessions: ["s"]), now: 1_000)
            try await f.append(.sessionsRevoked, subject: Q.user("b-\(index)"), jti: "b-\(index)")
        }
        let now = Date().timeIntervalSince1970
        let claimed = try await f.stores[0].queue.claim(owner: "slow", limit: 10, lease: 5, now: now)
        #expect(claimed.count == 3)
        // The lease of the second runs out; another receiver rescues and claims it.
        try await f.cluster.psql("UPDATE sets SET lease_expires_at = \(now - 1) WHERE jti = 'b-1'")
        #expect(try await f.stores[1].queue.rescueExpiredLeases(now: now) == ["b-1"])
        #expect(try await f.stores[1].queue.claim(owner: "other", limit: 10, lease: 30, now: now).map(\.jti) == ["b-1"])
        let items = try claimed.map { claim in
            let claims = try SecurityEventToken(payload: CompactJWS(claim.token).payload)
            return FinishItem(claim: claim, plan: ActionPlan.plan(for: claims, table: .default, now: now + 1), claims: claims)
        }
        let reports = try await f.stores[0].queue.finish(items, applyToAccounts: true, now: now + 1)
        #expect(reports.map { $0 != nil } == [true, false, true])
        #expect(reports[0]?.outcomes.map(\.result) == ["ended 1 session"])
        #expect(try await f.cluster.psql("SELECT string_agg(jti || ' ' || state, ', ' ORDER BY jti) FROM sets") == "b-0 done, b-1 pending, b-2 done")
        #expect(try await f.cluster.psql("SELECT lease_owner FROM sets WHERE jti = 'b-1'") == "other")
        #expect(try await f.cluster.psql("SELECT count(*) FROM applied_actions") == "2")
        try await f.close()
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
