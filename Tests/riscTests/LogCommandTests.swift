import Foundation
import RISCCore
import RISCLocal
import Testing

/// `risc log verify` (issue 28): its exit statuses and what it prints, on a log risc wrote.
@Suite("risc log verify")
struct LogCommandTests {
    @Test("a whole chain: exit 2 (no checkpoint to rule out a cut end), named as whole; an edited line: exit 1 naming the line and why")
    func verify() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-logcmd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/events.log"
        let log = try JSONLinesEventLog(path: path, logID: "node-b")
        for index in 0..<4 {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000)
            record["jti"] = .string("jti-\(index)")
            log.record(record)
        }
        log.close()

        var result = try RiscBinary.run(["log", "verify", "--data-dir", directory])
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("chain whole: 5 lines, seq 0–4, in 1 file, log node-b"), "\(result.stdout)")
        #expect(result.stdout.contains("undecided: no signed checkpoint"))
        result = try RiscBinary.run(["log", "verify", "--json", path])
        let object = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(result.status == 2 && object["result"] == "undecided" && object["last_seq"] == 4)

        var text = try String(contentsOfFile: path, encoding: .utf8)
        text = text.replacingOccurrences(of: "jti-1", with: "jti-9")
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        result = try RiscBinary.run(["log", "verify", "--data-dir", directory])
        #expect(result.status == 1)
        #expect(result.stdout.contains("TAMPERED: prev_mismatch at \(path):4 (seq 3)"), "\(result.stdout)")
        result = try RiscBinary.run(["log", "verify", "--json", "--data-dir", directory])
        let tampered = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(result.status == 1 && tampered["result"] == "tampered" && tampered["problem"]?.objectValue?["reason"] == "prev_mismatch")

        result = try RiscBinary.run(["log", "verify", "--data-dir", directory + "/nothing"])
        #expect(result.status == 64 && result.stderr.contains("no event log in"))
    }
}
