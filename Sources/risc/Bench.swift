import ArgumentParser
import Foundation
import RISCCore
import RISCTestKit

extension RiscCommand {
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Benchmarks that print their figures.",
            subcommands: [VerifyBench.self, ServeBench.self, ActionsBench.self, RetentionBench.self, MetricsBench.self, LogBench.self]
        )
    }
}

/// What every benchmark and drill does first. Ctrl-C (SIGTERM, SIGHUP) stops what it starts
/// (`Scratch.cleanUpOnSignals`), and so does its warden when it is killed with -9
/// (`Scratch.startWarden`). Its standard output goes out a line at a time: with the output and
/// its receivers' logs sent to one file (`> out 2>&1`), stdio's blocks put a bench's lines after
/// every log line of every run, and a block that filled while a receiver logged cut a line (and a
/// "µs") in two.
func startBenchOrDrill() {
    Scratch.cleanUpOnSignals()
    Scratch.startWarden()
    ChildProcess.standardOutputByLines()
}

extension RiscCommand {
    /// `risc scratch-warden`, started by `Scratch.startWarden` (not for people: left out of help):
    /// once the benchmark or drill that started it has ended, stops what it left running.
    struct ScratchWarden: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "scratch-warden", abstract: "Stops what a benchmark or drill left running when it ends.", shouldDisplay: false)

        func run() throws {
            guard let directory = ProcessInfo.processInfo.environment[Scratch.markVariable], Scratch.isDirectoryOfAProcess(directory) else {
                throw ValidationError("only a benchmark or drill starts the scratch warden (\(Scratch.markVariable) names its directory)")
            }
            if let done = Scratch.ward(directory: directory) {
                FileHandle.standardError.write(Data("risc: a benchmark or drill ended without stopping what it started: \(done)\n".utf8))
            }
        }
    }
}

extension RiscCommand.Bench {
    /// The event types the store benchmarks cycle through, with their extra members.
    static let seededTypes: [(EventType, JSONObject)] = [
        (.sessionsRevoked, [:]), (.tokensRevoked, [:]), (.accountDisabled, ["reason": "hijacking"]),
        (.accountEnabled, [:]), (.accountCredentialChangeRequired, [:]),
    ]

    /// Signs `count` SETs with the Ed25519 key in `keys` (quick to sign) and appends them to
    /// `store` from four tasks; `describe` gives each one's type index, subject, jti and times.
    static func appendSignedSETs(
        to store: any EventStore, count: Int, keys: String, types: [(EventType, JSONObject)] = seededTypes,
        describe: @escaping @Sendable (Int) -> (subject: String, jti: String, iat: Double?, receivedAt: Double)
    ) async throws {
        let keyDirectory = try KeyDirectory(url: URL(fileURLWithPath: keys))
        guard let entry = keyDirectory.entry(for: .eddsa) else { throw ValidationError("no EdDSA key in \(keys)") }
        let factory = SETFactory(signer: entry.signer)
        let jwks = try keyDirectory.jwks
        try await withThrowingTaskGroup(of: Void.self) { group in
            for chunk in 0..<4 {
                group.addTask {
                    for index in stride(from: chunk, to: count, by: 4) {
                        let (type, extra) = types[index % types.count]
                        let set = describe(index)
                        _ = try await store.append(
                            try await factory.storedRecord(
                                type: type, subject: factory.accountSubject(set.subject), extra: extra, jti: set.jti, iat: set.iat,
                                keys: jwks, receivedAt: set.receivedAt))
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
