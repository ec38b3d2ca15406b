import Foundation
import Logging
import RISCCore
import RISCTestKit
import Testing

@testable import RISCSQLite

/// Retention (issue 14 §3) on the embedded store: done SETs are stripped after `retention.done`,
/// forgotten `retention.duplicates` after receipt; pending and dead ones are never touched, and a
/// stripped SET is still a duplicate.
@Suite("Retention")
struct RetentionTests {
    @Test("stripped after retention.done, forgotten after retention.duplicates; pending and dead kept; duplicates still recognised")
    func stripThenForget() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        for jti in ["done-1", "done-2", "dead-1", "pending-1"] {
            _ = try await store.append(try await SQLiteEventStoreTests.record(jti: jti))
        }
        let admin = try SQLiteStore.queueAdmin(directory: directory)
        let received = try await admin.list(state: nil, limit: 10)[0].receivedAt
        let db = try SQLiteConnection(path: directory + "/risc.sqlite3")
        try db.execute("UPDATE sets SET state = 'done', processed_at = \(received) WHERE jti LIKE 'done-%'")
        try db.execute("UPDATE sets SET state = 'dead' WHERE jti = 'dead-1'")
        try db.execute("INSERT INTO applied_actions VALUES ((SELECT id FROM sets WHERE jti = 'done-1'), 0, 'end_sessions', 0, 'x')")
        let retention = try SQLiteRetention(directory: directory)
        let policy = RetentionPolicy()

        // Within retention.done: nothing happens.
        #expect(try retention.retain(policy, now: received + policy.done - 60, batch: 100) == RetentionPass())
        // Past it: the two done SETs lose their token and subjects, nothing else.
        let stripped = try retention.retain(policy, now: received + policy.done + 60, batch: 1)
        #expect(stripped == RetentionPass(stripped: 1, forgotten: 0))
        #expect(try retention.retain(policy, now: received + policy.done + 60, batch: 100).stripped == 1)
        #expect(try db.scalar("SELECT count(*) FROM sets WHERE token = '' AND subjects = '[]' AND pruned_at IS NOT NULL") == 2)
        #expect(try db.scalar("SELECT count(*) FROM sets WHERE token != '' AND jti IN ('dead-1', 'pending-1')") == 2)
        #expect(try await admin.tokens(StoredSETSelection()).map(\.jti).sorted() == ["dead-1", "pending-1"])  // replay skips stripped ones
        // A redelivery of a stripped SET is still a duplicate.
        if case .duplicate(_, let deliveries) = try await store.append(try await SQLiteEventStoreTests.record(jti: "done-1")) {
            #expect(deliveries == 2)
        } else {
            Issue.record("a stripped SET was stored again")
        }
        // Past retention.duplicates (from receipt): the slim rows go, with their applied actions.
        let forgotten = try retention.retain(policy, now: received + policy.duplicates + 60, batch: 100)
        #expect(forgotten == RetentionPass(stripped: 0, forgotten: 2))
        #expect(try await admin.list(state: nil, limit: 10).map(\.jti).sorted() == ["dead-1", "pending-1"])
        #expect(try db.scalar("SELECT count(*) FROM applied_actions") == 0)
        // Off: nothing is ever touched.
        #expect(try retention.retain(RetentionPolicy(done: 0), now: received + 1e9, batch: 100) == RetentionPass())
        store.close()
    }

    @Test("stripping frees pages for reuse (SQLite does not when an UPDATE shrinks rows in place)")
    func strippingFreesPages() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        for index in 0..<400 { _ = try await store.append(try await SQLiteEventStoreTests.record(jti: "bulk-\(index)")) }
        store.close()
        let db = try SQLiteConnection(path: directory + "/risc.sqlite3")
        try db.execute("UPDATE sets SET state = 'done', processed_at = received_at")
        let retention = try SQLiteRetention(directory: directory)
        let before = try retention.bytesInUse()
        let now = Date().timeIntervalSince1970 + RetentionPolicy().done + 60
        #expect(try retention.retain(RetentionPolicy(), now: now, batch: 1_000).stripped == 400)
        let after = try retention.bytesInUse()
        #expect(after < before * 0.6, "in use \(before) → \(after) bytes")
    }

    @Test("the policy's own rules: duplicates at least done and at least a week; 0 keeps everything")
    func policyProblems() {
        #expect(RetentionPolicy().problems.isEmpty)
        #expect(!RetentionPolicy(done: 30 * 86_400, duplicates: 86_400).problems.isEmpty)
        #expect(!RetentionPolicy(done: 60, duplicates: 3_600).problems.isEmpty)
        #expect(RetentionPolicy(done: 0, duplicates: 0).problems.isEmpty && !RetentionPolicy(done: 0).isOn)
        #expect(RetentionPolicy().stripBefore(now: 100 * 86_400) == 70 * 86_400)
        #expect(RetentionPolicy().forgetBefore(now: 100 * 86_400) == 10 * 86_400)
    }
}
