import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCStorage
import RISCTestKit

extension RiscCommand.Bench {
    struct RetentionBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retention",
            abstract: "Store size per million SETs: whole, after retention.done strips them, after retention.duplicates forgets them.",
            discussion: """
                Stores --sets signed SETs with their actions applied inline, as risc serve does, then runs retention passes at \
                the times the policy acts. The embedded store by default (pages in use); with --store-url or --config a \
                PostgreSQL store (`throwaway`: a local cluster started for the run; otherwise an empty database of its own), \
                measured after VACUUM FULL (what tables that reuse their freed space settle at).
                """
        )

        @Option(parsing: .unconditional, help: "SETs to store (the figures are scaled to a million).") var sets: Int = 200_000
        @Option(help: "Key directory (its Ed25519 key signs the SETs quickly).") var keys: String = "keys/test"
        @OptionGroup var scratch: ScratchStoreOption

        func validate() throws { try OptionRange.atLeast(1, sets, "--sets") }

        func run() async throws {
            startBenchOrDrill()
            let work = Scratch.root.appendingPathComponent("risc-bench-retention-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            let scratchStore = try await scratch.open(data: work.appendingPathComponent("data").path, work: work)
            defer { scratchStore.close() }
            let storage = scratchStore.storage
            let log = try JSONLinesEventLog(path: nil)
            defer { log.close() }
            try storage.enableInlineActions(table: .default, log: log)
            let start = systemNow()
            // Four types: credential-change events are not part of this mix.
            try await RiscCommand.Bench.appendSignedSETs(
                to: try storage.events(), count: sets, keys: keys, types: Array(RiscCommand.Bench.seededTypes.prefix(4))
            ) { index in
                (subject: "1\(100_000_000_000 + index)", jti: UUID().uuidString, iat: nil, receivedAt: start)
            }
            let retention = try storage.retention(), policy = RetentionPolicy()
            let whole = try await storage.bytesInUse()
            var pass = RetentionPass()
            repeat { pass = try await retention.retain(policy, now: start + policy.done + 3_600, batch: 10_000) } while pass.stripped == 10_000
            let stripped = try await storage.bytesInUse()
            repeat { pass = try await retention.retain(policy, now: start + policy.duplicates + 3_600, batch: 10_000) } while pass.forgotten == 10_000
            let forgotten = try await storage.bytesInUse()
            report(whole: whole, stripped: stripped, forgotten: forgotten, store: scratchStore.isShared ? "PostgreSQL (after VACUUM FULL)" : "embedded store (pages in use)")
        }

        func report(whole: Double, stripped: Double, forgotten: Double, store: String) {
            let policy = RetentionPolicy()
            let scale = 1_000_000 / Double(sets)
            func mb(_ bytes: Double) -> String { String(format: "%.0f MB", bytes * scale / 1e6) }
            print("\(store): size per million SETs (\(sets) stored, scaled): whole \(mb(whole)), stripped after retention.done \(mb(stripped)), after retention.duplicates \(mb(forgotten))")
            let perDay = 1_000_000.0 / 365
            let steady = (whole * policy.done / 86_400 + stripped * (policy.duplicates - policy.done) / 86_400) * perDay / Double(sets)
            print(
                String(
                    format: "at a million SETs a year (%.0f a day), with the default retention the store holds %.0f MB in use; without retention it grows by %@ a year", perDay, steady / 1e6, mb(whole)
                ))
        }
    }
}
