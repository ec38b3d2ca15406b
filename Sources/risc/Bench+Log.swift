import ArgumentParser
import Foundation
import RISCCore
import RISCLocal
import RISCTestKit

extension RiscCommand.Bench {
    struct LogBench: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "log",
            abstract: "The event log's hash chain: what it adds to a line, and how fast `risc log verify` reads.",
            discussion: """
                Records --lines lines shaped like a SET's received and applied lines from one thread, through the event \
                log's writer with the chain and without it (the same run, alternating rounds), and prints the time a line \
                takes in each; then verifies the chained log as `risc log verify` does and prints its speed.
                """
        )

        @Option(parsing: .unconditional, help: "Lines to write per round (and to verify).") var lines: Int = 1_000_000
        @Option(parsing: .unconditional, help: "Rounds of each (chained, plain), alternating.") var rounds: Int = 3

        func validate() throws {
            try OptionRange.atLeast(1, lines, "--lines")
            try OptionRange.atLeast(1, rounds, "--rounds")
        }

        func run() throws {
            startBenchOrDrill()
            let work = Scratch.root.appendingPathComponent("risc-bench-log-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: work) }
            var record = EventLogRecord(step: .received, outcome: .accepted, time: systemNow())
            record["jti"] = "9f3c2e1a-5b7d-4c8e-a1f0-2d4b6c8e0a12"
            record["iss"] = "https://accounts.google.com/"
            record["events"] = ["https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"]
            record["subject"] = "110169484474386276334"
            record["remote"] = "203.0.113.7"
            record.latency = 0.000_412
            var best = (chained: Double.infinity, plain: Double.infinity)
            var chainedPath = ""
            for round in 0..<rounds {
                for chained in [true, false] {
                    let path = "\(work)/\(chained ? "chained" : "plain")-\(round).log"
                    let log = try JSONLinesEventLog(path: path, flushInterval: 0.02, chained: chained)
                    let clock = ContinuousClock()
                    let elapsed = clock.measure {
                        for _ in 0..<lines { log.record(record) }
                    }
                    log.close()
                    let perLine = elapsed.seconds * 1e6 / Double(lines)
                    if chained {
                        best.chained = min(best.chained, perLine)
                        chainedPath = path
                    } else {
                        best.plain = min(best.plain, perLine)
                        try? FileManager.default.removeItem(atPath: path)
                    }
                    if chained && round < rounds - 1 { try? FileManager.default.removeItem(atPath: path) }
                }
            }
            let size = (try FileManager.default.attributesOfItem(atPath: chainedPath)[.size] as? NSNumber)?.doubleValue ?? 0
            let clock = ContinuousClock()
            let began = clock.now
            let summary = try EventLogVerifier.verify(files: [chainedPath])
            let verifying = clock.now - began
            let seconds = verifying.seconds
            print("event log, \(lines) lines a round, best of \(rounds) (one thread recording, the writer's thread writing)")
            print(String(format: "  record, chained          %.2f µs a line", best.chained))
            print(String(format: "  record, plain            %.2f µs a line", best.plain))
            print(String(format: "  the chain's cost         %.2f µs a line (%.2f µs a SET with its received and applied lines)", best.chained - best.plain, 2 * (best.chained - best.plain)))
            print(
                String(
                    format: "  verify                   %d lines, %.0f MB in %.2f s: %.0f MB/s, %.0f lines/s%@", summary.lines, size / 1e6, seconds, size / 1e6 / seconds,
                    Double(summary.lines) / seconds, summary.problem == nil ? "" : " (BROKEN)"))
        }
    }
}
