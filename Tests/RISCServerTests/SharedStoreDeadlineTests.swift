import Foundation
import Logging
import RISCCore
import RISCStorage
import RISCTestKit
import Testing

@testable import RISCPostgres

/// Found: `risc queue`, `risc replay --local`'s selections and `risc stream verify`'s requests on a
/// shared store waited for ever on a PostgreSQL server that stopped answering in the middle of the
/// command (its connection open, nothing coming back), saying nothing, and so did `risc store
/// copy` on a server that did not answer it; the account commands gave up after a minute (`DeadlineAccounts`). The commands take the
/// queue's administration and the verification requests with `Storage.admin(within:)` and
/// `verifications(within:)`; the copy's calls to its target have a deadline of their own.
@Suite("A shared store that stops answering: the commands' calls give up at their deadline")
struct SharedStoreDeadlineTests {
    static let logger = Logger(label: "deadline") { _ in SwiftLogNoOpLogHandler() }

    /// Runs `call` with the server stopped: not answered just short of its minute on `clock`, given
    /// up with a timeout naming `what` once it passes.
    static func expectGivesUp(_ name: String, what: String, clock: TestClock, _ call: @escaping @Sendable () async throws -> Void) async {
        let (early, answer) = await CallWatch(call).passDeadline(60, on: clock)
        #expect(!early, "\(name): answered before its deadline, with the server stopped")
        guard case .failure(let error as StoreError) = answer else {
            Issue.record("\(name): still waiting past its deadline on the clock (and 20 s of real time)")
            return
        }
        #expect(error.code == .timeout && "\(error)".contains("the store did not answer within 60 s (\(what))"), "\(name): \(error)")
    }

    @Test("server stopped (SIGSTOP): each queue and verification call fails with a timeout once the clock passes its deadline, not before")
    func callsGiveUp() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let storage = try Storage(
                settings: StoreSettings(url: try StoreURL(cluster.url)), dataDirectory: cluster.directory, tokenKeyFile: nil, needsTokenKey: false,
                logger: Self.logger)
            defer { storage.close() }
            try await storage.prepare()
            let clock = TestClock()
            let admin = try storage.admin(within: 60, clock: clock.function)
            let verifications = try storage.verifications(within: 60, clock: clock.function)
            // Answered while the server answers.
            #expect(try await admin.counts(now: 1_000).pending == 0)
            #expect(try await verifications.entry(state: "none") == nil)
            let calls: [(String, String, @Sendable () async throws -> Void)] = [
                ("counts", "reading the store", { _ = try await admin.counts(now: 1_000) }),
                ("list", "reading the store", { _ = try await admin.list(state: nil, limit: 10) }),
                ("requeue", "writing to the store", { _ = try await admin.requeue(ids: [1]) }),
                ("purge", "writing to the store", { _ = try await admin.purgeDead(olderThan: 0, now: 1_000) }),
                ("verification request", "writing to the store", { try await verifications.request(state: "s", apiBase: "https://risc.example", now: 1_000) }),
            ]
            cluster.freeze(true)
            defer { cluster.freeze(false) }
            for (name, what, call) in calls { await Self.expectGivesUp(name, what: what, clock: clock, call) }
            cluster.freeze(false)
            #expect(try await admin.counts(now: 1_000).pending == 0)
        }
    }

    /// Not a stopped server here: the copy's migration probes the server with a connection of its
    /// own first, whose 5-s connect deadline (real time) raced the test's clock on a loaded machine.
    /// Another session holds the lock every migration takes, so the server answers and the copy's
    /// migration waits, as behind a receiver's migration that never ends.
    @Test("store copy whose migration the server never answers (its lock held elsewhere) gives up once the clock passes its deadline, and marks nothing moved")
    func copyGivesUp() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let source = Scratch.root.appendingPathComponent("risc-copy-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: source) }
            let embedded = try Storage(settings: StoreSettings(), dataDirectory: source, tokenKeyFile: nil, needsTokenKey: false, logger: Self.logger)
            _ = try embedded.events()  // makes the embedded store
            embedded.close()
            let target = try Storage(
                settings: StoreSettings(url: try StoreURL(cluster.url)), dataDirectory: source, tokenKeyFile: nil, needsTokenKey: false, logger: Self.logger)
            defer { target.close() }
            let holder = Task { _ = try? await cluster.psql("SELECT pg_advisory_lock(\(PostgresSchema.advisoryLock)); SELECT pg_sleep(600)") }
            let held = await waitWhile { (try? await cluster.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")) != "1" }
            try #require(held, "the migration's lock was not taken")
            let clock = TestClock()
            await Self.expectGivesUp("store copy", what: "migrating the store", clock: clock) {
                try await target.copy(embeddedStoreIn: source, batch: 100, sample: 1, callsWithin: 60, clock: clock.function) { _ in }
            }
            #expect(!FileManager.default.fileExists(atPath: source + "/moved-to"))
            try await cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()")
            await holder.value
        }
    }
}
