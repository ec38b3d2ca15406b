import Foundation
import Logging
import RISCCore
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

/// Found: `risc queue`, `risc replay --local`'s selections and `risc stream verify`'s requests on a
/// shared store waited for ever on a PostgreSQL server that stopped answering in the middle of the
/// command (its connection open, nothing coming back), saying nothing; the account commands gave
/// up after a minute (`DeadlineAccounts`). The commands take the queue's administration and the
/// verification requests with `Storage.admin(within:)` and `verifications(within:)`.
@Suite("A shared store that stops answering: the commands' queue and verification calls give up at their deadline")
struct SharedStoreDeadlineTests {
    static let logger = Logger(label: "deadline") { _ in SwiftLogNoOpLogHandler() }

    @Test("server stopped (SIGSTOP): each queue and verification call fails with a timeout once the clock passes its deadline, not before")
    func callsGiveUp() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let storage = try Storage(settings: StoreSettings(url: try StoreURL(cluster.url)), dataDirectory: cluster.directory, tokenKeyFile: nil, needsTokenKey: false, logger: Self.logger)
            defer { storage.close() }
            try await storage.prepare()
            let clock = TestClock()
            let admin = try storage.admin(within: 60, clock: clock.function)
            let verifications = try storage.verifications(within: 60, clock: clock.function)
            // Answered while the server answers.
            #expect(try await admin.counts(now: 1_000).pending == 0)
            #expect(try await verifications.entry(state: "none") == nil)
            let calls: [(String, @Sendable () async throws -> Void)] = [
                ("counts", { _ = try await admin.counts(now: 1_000) }),
                ("list", { _ = try await admin.list(state: nil, limit: 10) }),
                ("requeue", { _ = try await admin.requeue(ids: [1]) }),
                ("purge", { _ = try await admin.purgeDead(olderThan: 0, now: 1_000) }),
                ("verification request", { try await verifications.request(state: "s", apiBase: "https://risc.example", now: 1_000) }),
            ]
            cluster.freeze(true)
            defer { cluster.freeze(false) }
            for (name, call) in calls {
                let watch = CallWatch(call)
                // Once its deadline's timer looks at the clock (on a loaded machine it may start late).
                await clock.waitForReads(2)
                clock.advance(59)
                await clock.waitForReads(2)
                #expect(watch.answer == nil, "\(name): answered before its deadline, with the server stopped")
                clock.advance(2)
                _ = await waitWhile(upTo: 20) { watch.answer == nil }
                guard case .failure(let error as StoreError) = watch.answer else {
                    Issue.record("\(name): still waiting 61 s after it began on the clock (and 20 s of real time)")
                    continue
                }
                #expect(error.code == .timeout && "\(error)".contains("the store did not answer within 60 s"), "\(name): \(error)")
            }
            cluster.freeze(false)
            #expect(try await admin.counts(now: 1_000).pending == 0)
        }
    }
}
