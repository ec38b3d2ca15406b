import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCStore
import RISCTestKit

extension RiscCommand.Bench {
    struct RetentionBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retention",
            abstract: "Store size per million SETs: whole, after retention.done strips them, after retention.duplicates forgets them.",
            discussion: "Stores --sets signed SETs with their actions applied inline, as risc serve does, then runs retention passes at the times the policy acts."
        )

        @Option(help: "SETs to store (the figures are scaled to a million).") var sets: Int = 200_000
        @Option(help: "Key directory (its Ed25519 key signs the SETs quickly).") var keys: String = "keys/test"

        func run() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-bench-retention-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let keyDirectory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            guard let entry = keyDirectory.entry(for: .eddsa) else { throw ValidationError("no EdDSA key in \(keys)") }
            let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
            let log = try JSONLinesEventLog(path: nil)
            let store = try SQLiteEventStore(directory: directory, logger: logger)
            try store.enableInlineActions(table: .default, log: log, directory: directory)
            let factory = SETFactory(signer: entry.signer)
            let jwks = try keyDirectory.jwks
            let types: [(EventType, JSONObject)] = [
                (.sessionsRevoked, [:]), (.tokensRevoked, [:]), (.accountDisabled, ["reason": "hijacking"]), (.accountEnabled, [:]),
            ]
            let start = Date().timeIntervalSince1970
            let count = sets
            try await withThrowingTaskGroup(of: Void.self) { group in
                for chunk in 0..<4 {
                    group.addTask {
                        for index in stride(from: chunk, to: count, by: 4) {
                            let (type, extra) = types[index % types.count]
                            _ = try await store.append(try await factory.storedRecord(
                                type: type, subject: factory.accountSubject("1\(100_000_000_000 + index)"), extra: extra,
                                jti: UUID().uuidString, keys: jwks, receivedAt: start))
                        }
                    }
                }
                try await group.waitForAll()
            }
            store.close()
            log.close()
            let retention = try SQLiteRetention(directory: directory)
            let policy = RetentionPolicy()
            func inUse() throws -> Double { try retention.bytesInUse() }
            let whole = try inUse()
            var pass = RetentionPass()
            repeat { pass = try retention.retain(policy, now: start + policy.done + 3_600, batch: 10_000) } while pass.stripped == 10_000
            let stripped = try inUse()
            repeat { pass = try retention.retain(policy, now: start + policy.duplicates + 3_600, batch: 10_000) } while pass.forgotten == 10_000
            let forgotten = try inUse()
            let scale = 1_000_000 / Double(sets)
            func mb(_ bytes: Double) -> String { String(format: "%.0f MB", bytes * scale / 1e6) }
            print("store size per million SETs (\(sets) stored, scaled): whole \(mb(whole)), stripped after retention.done \(mb(stripped)), after retention.duplicates \(mb(forgotten))")
            let perDay = 1_000_000.0 / 365
            let steady = (whole * policy.done / 86_400 + stripped * (policy.duplicates - policy.done) / 86_400) * perDay / Double(sets)
            print(String(format: "at a million SETs a year (%.0f a day), with the default retention the store holds %.0f MB in use; without retention it grows by %@ a year", perDay, steady / 1e6, mb(whole)))
        }
    }
}
