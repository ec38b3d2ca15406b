import ArgumentParser
import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCTestKit

extension RiscCommand.Bench {
    struct MetricsBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "metrics",
            abstract: "What metrics cost: one SET's observation (the intake's hot path), alone and from four tasks, and one /metrics scrape of a running receiver.",
            discussion: "Build with -c release for meaningful figures: swift run -c release risc bench metrics"
        )

        @Option(help: "Seconds to run each measurement.")
        var seconds: Double = 2

        @Option(help: "A JWK Set file for the receiver (it verifies nothing here).", transform: OptionRange.path)
        var jwksFile: String = "keys/test/jwks.json"

        func run() async throws {
            startBenchOrDrill()
            let directory = Scratch.root.appendingPathComponent("risc-bench-metrics-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = ReceiverConfiguration()
            configuration.audiences = ["bench.apps.googleusercontent.com"]
            configuration.jwksFile = jwksFile
            configuration.dataDirectory = directory.path
            configuration.host = "127.0.0.1"
            configuration.port = 0
            configuration.adminPort = 0
            let receiver = try Receiver(configuration: configuration, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
            let running = Task { try await receiver.run() }
            var ports = receiver.adminPorts.makeAsyncIterator()
            guard let adminPort = await ports.next() else { throw ValidationError("the receiver did not start") }
            let metrics = receiver.metrics
            let outcomes: [(String, String?)] = [("accepted", nil), ("accepted", nil), ("accepted", nil), ("duplicate", nil), ("rejected", "invalid_request")]

            let alone = VerifyBench.rate(seconds: seconds, batch: 1_000) { index in
                let (outcome, err) = outcomes[index % outcomes.count]
                metrics.observe(outcome: outcome, err: err, verifySeconds: 0.000_21, commitSeconds: 0.001_3)
            }
            let clock = ContinuousClock(), start = clock.now, seconds = seconds
            let total = await withTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var count = 0
                        while (clock.now - start).seconds < seconds {
                            for index in 0..<1_000 {
                                let (outcome, err) = outcomes[index % outcomes.count]
                                metrics.observe(outcome: outcome, err: err, verifySeconds: 0.000_21, commitSeconds: 0.001_3)
                            }
                            count += 1_000
                        }
                        return count
                    }
                }
                return await group.reduce(0, +)
            }
            let contended = Double(total) / (clock.now - start).seconds
            print(
                String(
                    format: "observe one SET (counter + 2 histograms): %.0f/s alone (%.0f ns each); %.0f/s from 4 tasks on %d cores",
                    alone, 1e9 / alone, contended, ProcessInfo.processInfo.activeProcessorCount))

            let client = CurlHTTPClient()
            var scrapes = 0, bytes = 0, series = 0
            let scrapeStart = clock.now
            while (clock.now - scrapeStart).seconds < seconds {
                let response = try await client.perform(HTTPRequest(url: "http://127.0.0.1:\(adminPort)/metrics"))
                guard response.status == 200 else { throw ValidationError("/metrics answered \(response.status)") }
                bytes = response.body.count
                series = String(decoding: response.body, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.count
                scrapes += 1
            }
            let perScrape = (clock.now - scrapeStart).seconds / Double(scrapes)
            print(
                String(
                    format: "GET /metrics over loopback: %.2f ms each (%d bytes, %d series; store and key-set queries included)",
                    perScrape * 1e3, bytes, series))
            await receiver.shutdown()
            try await running.value
        }
    }
}
