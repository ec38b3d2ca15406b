import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCServer
import RISCStorage
import RISCTestKit

extension RiscCommand.Bench {
    struct ActionsBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "actions",
            abstract: "Events applied per second to the account store by the queue's worker (embedded store: target ≥ 5,000/s).",
            discussion: """
                Seeds linked accounts, stores signed SETs of five types pending, then times the worker applying them \
                (the retry path: new SETs are applied inline as they arrive). The embedded store by default; with \
                --store-url or --config a PostgreSQL store (`throwaway`: a local cluster started for the run; \
                otherwise an empty database of its own, which it fills with test data) and its QueueWorker.
                """
        )

        @Option(parsing: .unconditional, help: "Linked accounts to seed.") var accounts: Int = 10_000
        @Option(parsing: .unconditional, help: "Stored SETs to apply.") var events: Int = 20_000
        @Option(help: "Key directory (its Ed25519 key signs the SETs quickly).", transform: OptionRange.path) var keys: String = "keys/test"
        @OptionGroup var scratch: ScratchStoreOption

        func validate() throws {
            try OptionRange.atLeast(1, accounts, "--accounts")
            try OptionRange.atLeast(1, events, "--events")
        }

        /// On either store: seeds the accounts, stores the SETs pending (inline actions off), then
        /// times the receiver's workers (as many, with its batch) applying them.
        func run() async throws {
            startBenchOrDrill()
            let work = Scratch.root.appendingPathComponent("risc-bench-actions-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            let scratchStore = try await scratch.open(data: work.appendingPathComponent("data").path, work: work)
            defer { scratchStore.close() }
            let storage = scratchStore.storage
            let repository = try storage.accounts()
            let accounts = self.accounts
            try await withThrowingTaskGroup(of: Void.self) { group in
                for chunk in 0..<8 {
                    group.addTask {
                        for index in stride(from: chunk, to: accounts, by: 8) {
                            _ = try await repository.link(
                                AccountLink(subject: "\(index)", userID: "u\(index)", sessions: ["s\(index)"], refreshTokens: ["1//0gtoken-\(index)"]),
                                now: 1_000)
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await RiscCommand.Bench.appendSignedSETs(to: try storage.events(), count: events, keys: keys) { index in
                ("\(index % accounts)", "a\(index)", 2_000 + Double(index), 3_000)
            }
            let log = try JSONLinesEventLog(path: work.appendingPathComponent("events.log").path)
            let shape = try storage.workerShape(webhook: false), queue = try storage.queue()
            let workers = (0..<shape.count).map { index in
                var settings = QueueWorker.Settings(owner: "bench-\(index)")
                settings.batch = shape.batch
                return QueueWorker(queue: queue, settings: settings, log: log, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
            }
            let start = Date()
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in workers {
                    group.addTask {
                        var applied = 0
                        while true {
                            let n = try await worker.processDue(now: 1e10)
                            if n == 0 { return applied }
                            applied += n
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            let seconds = Date().timeIntervalSince(start)
            log.close()
            let done = try await storage.admin().counts(now: 1e10)
            guard done.pending == 0, done.dead == 0 else { throw ValidationError("not all applied: \(done)") }
            // Claims, not SETs, are what the workers count: a batch whose finish failed is claimed again.
            if applied > done.done { print("(\(applied - done.done) claim(s) retried after a failed finish: see the event log)") }
            let rate = Double(done.done) / seconds
            // The target is the embedded store's; on PostgreSQL each action is a round trip to the
            // server (latency-bound), and new SETs are applied inline as they arrive.
            let target = scratchStore.isShared ? "no target: a round trip an action" : "target ≥ 5,000/s: \(rate >= 5_000 ? "met" : "missed")"
            print(
                String(
                    format: "%@: applied %d SETs (%d accounts; sessions-revoked, tokens-revoked, account-disabled, account-enabled, credential-change) in %.2f s: %.0f events/s (%@)",
                    scratchStore.name, done.done, accounts, seconds, rate, target))
        }
    }
}
