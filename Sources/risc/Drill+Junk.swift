import ArgumentParser
import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Synchronization

extension RiscCommand.Drill {
    struct Junk: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Flood the endpoint with SETs signed by unknown keys; check key-set fetches and valid SETs' latency.",
            discussion: """
                Serves a discovery document and JWKS on loopback (counting fetches), starts this binary's `risc serve` \
                against it, measures valid SETs' latency alone, then again while a flood of distinct SETs with unknown \
                kids runs beside them. Passes when the flood cost at most one key-set fetch per unknown-kid cooldown \
                and the valid SETs' p99 stayed within 2× of the figure without the flood.
                """
        )

        @Option(parsing: .unconditional, help: "Seconds per phase.") var seconds: Double = 5
        @Option(parsing: .unconditional, help: "Valid SETs per second (both phases).") var validRate: Double = 300
        @Option(parsing: .unconditional, help: "Unknown-kid SETs per second in the flood.") var junkRate: Double = 6_000
        @Option(parsing: .unconditional, help: "Concurrent senders of junk.") var junkConcurrency: Int = 12
        @Option(parsing: .unconditional, help: "Unknown-kid cooldown given to the server, seconds.") var cooldown: Double = 2
        @Option(parsing: .unconditional, help: "Port for the server under test (admin: +1).") var port: Int = 18_743
        @Option(help: "Lua script for wrk.") var script: String = "Benchmarks/serve.lua"

        func validate() throws {
            try OptionRange.atLeast(1, junkConcurrency, "--junk-concurrency")
            try OptionRange.port(port, following: 1)
            try OptionRange.within(0.001...3_600, seconds, "--seconds")
            try OptionRange.within(0.001...1_000_000, validRate, "--valid-rate")
            try OptionRange.within(0...1_000_000, junkRate, "--junk-rate")
            try OptionRange.within(0...86_400, cooldown, "--cooldown")
        }

        func run() async throws {
            startBenchOrDrill()
            let work = Scratch.root.appendingPathComponent("risc-junk-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            let keys = work.appendingPathComponent("keys")
            let published = try KeyDirectory.generate(into: keys, algorithm: .rs256, keyID: "published")
            let directory = try KeyDirectory(url: keys)
            let issuer = try LocalIssuer(jwks: String(decoding: directory.jwksData, as: UTF8.self), issuer: SETFactory.defaultIssuer)
            defer { issuer.stop() }
            let server = ChildServer(
                arguments: [
                    "--audience", SETFactory.defaultAudience, "--discovery-url", issuer.discoveryURL, "--issuer", SETFactory.defaultIssuer,
                    "--host", "127.0.0.1", "--port", "\(port)", "--data-dir", work.appendingPathComponent("data").path,
                    "--set", "jwks.unknown_kid_cooldown=\(cooldown)",
                ], adminPort: port + 1, errorLog: work.appendingPathComponent("serve.err"))
            try await server.start()
            defer { server.stop(signal: SIGTERM) }
            let url = "http://127.0.0.1:\(port)"
            // Pre-signed tokens in files, sent by wrk (keep-alive, steady rate): the drill measures the
            // server, not a load generator's signing or connection set-up.
            let validFile = work.appendingPathComponent("valid.txt"), junkFile = work.appendingPathComponent("junk.txt")
            try await RiscCommand.Bench.ServeBench.signTokens(count: Int(validRate * seconds * 3) + 100, signer: published.signer, into: validFile)
            try RiscCommand.Bench.ServeBench.writeJunkTokens(into: junkFile)

            /// wrk at `rate` over `connections` from `file`; returns its RESULT fields.
            @Sendable func wrk(_ file: URL, rate: Double, connections: Int, seconds: Double) throws -> [String: Double] {
                let delay = Int((Double(connections) * 1000 / rate).rounded())
                let output = runWithDefaultSignals([
                    "wrk", "-t1", "-c\(connections)", "-d\(Int(seconds.rounded(.up)))s", "--latency", "-s", script, url, "--", file.path, "1",
                    "\(delay)",
                ])
                guard let fields = RiscCommand.Bench.ServeBench.wrkResult(output) else {
                    throw RiscCommand.Bench.ServeBench.wrkMissing()
                }
                return fields
            }

            _ = try wrk(validFile, rate: validRate, connections: 4, seconds: 1)  // warm-up
            let alone = try wrk(validFile, rate: validRate, connections: 4, seconds: seconds)
            let fetchesBefore = issuer.requests(to: "/jwks")
            let junkConnections = junkConcurrency, junkRate = self.junkRate, floodSeconds = seconds + 1
            let floodStart = Date()
            let flood = Task.detached { () throws -> ([String: Double], Double) in
                let fields = try wrk(junkFile, rate: junkRate, connections: junkConnections, seconds: floodSeconds)
                return (fields, Date().timeIntervalSince(floodStart))
            }
            try await Task.sleep(for: .milliseconds(300))
            let beside = try wrk(validFile, rate: validRate, connections: 4, seconds: seconds)
            let (junk, floodElapsed) = try await flood.value
            let fetches = issuer.requests(to: "/jwks") - fetchesBefore

            let p99Alone = (alone["p99_us"] ?? 0) / 1000, p99Beside = (beside["p99_us"] ?? 0) / 1000
            let junkSent = Int(junk["requests"] ?? 0), junkRefused = Int(junk["errors_status"] ?? 0)
            // One fetch per cooldown over the flood's whole span: ⌊span / cooldown⌋ + 1 (a fetch may
            // open the span and another close it).
            let allowedFetches = Int((floodElapsed / cooldown).rounded(.down)) + 1
            print(
                String(
                    format: "junk drill: %.0f unknown-kid SETs/s for %.0f s (%d sent, %d refused), valid SETs at %.0f/s beside them",
                    Double(junkSent) / floodSeconds, floodSeconds, junkSent, junkRefused, validRate))
            print(String(format: "  key-set fetches during the flood   %d (allowed: one per %.1f s cooldown over %.1f s = %d)", fetches, cooldown, floodElapsed, allowedFetches))
            print(
                String(
                    format: "  valid p50 / p99 alone              %.2f / %.2f ms (%.0f sent, %.0f not 202)",
                    (alone["p50_us"] ?? 0) / 1000, p99Alone, alone["requests"] ?? 0, alone["errors_status"] ?? 0))
            print(
                String(
                    format: "  valid p50 / p99 beside the flood   %.2f / %.2f ms (%.0f sent, %.0f not 202)",
                    (beside["p50_us"] ?? 0) / 1000, p99Beside, beside["requests"] ?? 0, beside["errors_status"] ?? 0))
            print(String(format: "  p99 ratio                          %.2f× (allowed 2×)", p99Beside / max(p99Alone, 0.001)))
            guard fetches <= allowedFetches, p99Beside <= 2 * p99Alone, beside["errors_status"] == 0, alone["errors_status"] == 0,
                junkSent > 0, junkRefused == junkSent
            else {
                print("FAILED")
                throw ExitStatus.rejected
            }
            print("PASSED")
        }
    }
}
