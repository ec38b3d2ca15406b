import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCStore
import RISCTestKit

extension RiscCommand.Bench {
    struct ActionsBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "actions",
            abstract: "Events applied per second to the embedded account store (target ≥ 5,000/s)."
        )

        @Option(help: "Linked accounts to seed.") var accounts: Int = 10_000
        @Option(help: "Stored SETs to apply.") var events: Int = 20_000
        @Option(help: "Key directory (its Ed25519 key signs the SETs quickly).") var keys: String = "keys/test"

        func run() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-bench-actions-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
            let store = try SQLiteEventStore(directory: directory, logger: logger)
            let accountStore = try AccountStore(directory: directory)
            for index in 0..<accounts {
                try accountStore.link(.init(subject: "\(index)", userID: "u\(index)", sessions: ["s\(index)"], refreshTokens: ["1//0gtoken-\(index)"]), now: 1_000)
            }
            let accounts = self.accounts
            try await RiscCommand.Bench.appendSignedSETs(to: store, count: events, keys: keys) { index in
                ("\(index % accounts)", "a\(index)", 2_000 + Double(index), 3_000)
            }
            store.close()
            let log = try JSONLinesEventLog(path: directory + "/events.log")
            let worker = try ActionWorker(directory: directory, log: log, logger: logger)
            let start = Date()
            var applied = 0
            while true {
                let n = try worker.processDue(limit: 32, now: 1e10)
                if n == 0 { break }
                applied += n
            }
            let seconds = Date().timeIntervalSince(start)
            log.close()
            print(String(format: "applied %d SETs (%d accounts; sessions-revoked, tokens-revoked, account-disabled, account-enabled, credential-change) in %.2f s: %.0f events/s (target ≥ 5,000/s)",
                applied, accounts, seconds, Double(applied) / seconds))
        }
    }
}
