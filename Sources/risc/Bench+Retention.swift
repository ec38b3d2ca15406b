import ArgumentParser
import Foundation
import Logging
import RISCLocal
import RISCCore
import RISCPostgres
import RISCSQLite
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

        @Option(help: "SETs to store (the figures are scaled to a million).") var sets: Int = 200_000
        @Option(help: "Key directory (its Ed25519 key signs the SETs quickly).") var keys: String = "keys/test"
        @OptionGroup var scratch: ScratchStoreOption

        func run() async throws {
            if try scratch.isShared() { return try await runShared() }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-bench-retention-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
            let log = try JSONLinesEventLog(path: nil)
            let store = try SQLiteEventStore(directory: directory, logger: logger)
            try store.enableInlineActions(table: .default, log: log, directory: directory)
            let start = Date().timeIntervalSince1970
            // Four types: credential-change events are not part of this mix.
            try await RiscCommand.Bench.appendSignedSETs(
                to: store, count: sets, keys: keys, types: Array(RiscCommand.Bench.seededTypes.prefix(4))
            ) { index in
                (subject: "1\(100_000_000_000 + index)", jti: UUID().uuidString, iat: nil, receivedAt: start)
            }
            store.close()
            log.close()
            let retention = try SQLiteRetention(directory: directory)
            let policy = RetentionPolicy()
            let whole = try retention.bytesInUse()
            var pass = RetentionPass()
            repeat { pass = try retention.retain(policy, now: start + policy.done + 3_600, batch: 10_000) } while pass.stripped == 10_000
            let stripped = try retention.bytesInUse()
            repeat { pass = try retention.retain(policy, now: start + policy.duplicates + 3_600, batch: 10_000) } while pass.forgotten == 10_000
            let forgotten = try retention.bytesInUse()
            report(whole: whole, stripped: stripped, forgotten: forgotten, store: "embedded store (pages in use)")
        }

        /// The same on PostgreSQL, sizes after VACUUM FULL.
        func runShared() async throws {
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("risc-bench-retention-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            guard let shared = try await scratch.open(work: work) else { return }
            defer { shared.close() }
            let store = shared.store
            store.enableInlineActions(table: .default)
            let start = Date().timeIntervalSince1970
            try await RiscCommand.Bench.appendSignedSETs(
                to: store.events, count: sets, keys: keys, types: Array(RiscCommand.Bench.seededTypes.prefix(4))
            ) { index in
                (subject: "1\(100_000_000_000 + index)", jti: UUID().uuidString, iat: nil, receivedAt: start)
            }
            let policy = RetentionPolicy()
            let whole = try await store.events.compactedBytes()
            var pass = RetentionPass()
            repeat { pass = try await store.events.retain(policy, now: start + policy.done + 3_600, batch: 10_000) } while pass.stripped == 10_000
            let stripped = try await store.events.compactedBytes()
            repeat { pass = try await store.events.retain(policy, now: start + policy.duplicates + 3_600, batch: 10_000) } while pass.forgotten == 10_000
            let forgotten = try await store.events.compactedBytes()
            report(whole: whole, stripped: stripped, forgotten: forgotten, store: "PostgreSQL (after VACUUM FULL)")
        }

        func report(whole: Double, stripped: Double, forgotten: Double, store: String) {
            let policy = RetentionPolicy()
            let scale = 1_000_000 / Double(sets)
            func mb(_ bytes: Double) -> String { String(format: "%.0f MB", bytes * scale / 1e6) }
            print("\(store): size per million SETs (\(sets) stored, scaled): whole \(mb(whole)), stripped after retention.done \(mb(stripped)), after retention.duplicates \(mb(forgotten))")
            let perDay = 1_000_000.0 / 365
            let steady = (whole * policy.done / 86_400 + stripped * (policy.duplicates - policy.done) / 86_400) * perDay / Double(sets)
            print(String(format: "at a million SETs a year (%.0f a day), with the default retention the store holds %.0f MB in use; without retention it grows by %@ a year", perDay, steady / 1e6, mb(whole)))
        }
    }
}
