import Foundation
import Testing

/// Replays `Tests/FuzzInputs` through the fuzz targets built as plain runners: every kept input
/// must go through without a crash (a trap, a precondition such as the JSON round trip, a stack
/// overflow). The same inputs under libFuzzer: `scripts/fuzz`.
@Suite("Kept fuzz inputs")
struct FuzzReplayTests {
    @Test("each kept input runs through its target without a crash", arguments: ["FuzzSET", "FuzzJWKS", "FuzzFiles"])
    func replay(target: String) async throws {
        let folder = RiscBinary.repository.appendingPathComponent("Tests/FuzzInputs/\(target)")
        let inputs = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().map { folder.appendingPathComponent($0).path }
        #expect(inputs.count >= 10)
        let runner = RiscBinary.url.deletingLastPathComponent().appendingPathComponent(target)
        for input in inputs {
            let result = try await RiscBinary.run([input], executable: runner)
            #expect(result.status == 0, "\(target) crashed on \(input): \(result.stderr.suffix(500))")
        }
    }

    /// Found: scripts/fuzz built the targets with SwiftPM's `--sanitize=fuzzer --sanitize=address`,
    /// and swiftc keeps only the last of several `-sanitize=` options: AddressSanitizer and no
    /// coverage counters. libFuzzer saw 5 edges whatever it ran ("Is the code instrumented for
    /// coverage?"), so every "2,000,000 executions, 0 crashes" so far was a blind mutation of the
    /// seeds. The same 20,000 runs of FuzzSET from the vectors now reach well over a thousand.
    @Test("scripts/fuzz builds targets libFuzzer can steer: FuzzSET, seeded from the vectors, reaches hundreds of edges in 20,000 runs, with no crash")
    func fuzzingIsGuided() async throws {
        let result = try await RiscBinary.run(
            ["scripts/fuzz", "20000", "FuzzSET"], executable: URL(fileURLWithPath: "/bin/bash"), environment: ["FUZZ_SEED": "1"])
        let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("FuzzSET: ") && $0.contains(" executions in ") }.map(String.init) ?? ""
        let coverage = line.components(separatedBy: "cov: ").last.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
        #expect(result.status == 0, "\(result.stdout) \(result.stderr.suffix(1_000))")
        #expect(line.hasSuffix("crashes: 0"), "\(line)")
        #expect(coverage >= 300, "\(line)")
    }
}
