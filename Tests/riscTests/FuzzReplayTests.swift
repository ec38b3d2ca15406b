import Foundation
import Testing

/// Replays `Tests/FuzzInputs` through the fuzz targets built as plain runners: every kept input
/// must go through without a crash (a trap, a precondition such as the JSON round trip, a stack
/// overflow). The same inputs under libFuzzer: `scripts/fuzz`.
@Suite("Kept fuzz inputs")
struct FuzzReplayTests {
    @Test("each kept input runs through its target without a crash", arguments: ["FuzzSET", "FuzzJWKS"])
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
}
