import Foundation
import RISCCore
import Testing

/// `RiscBinary.run` wrote a command's whole standard input before reading anything, then read its
/// standard output to the end before its standard error: a command that wrote more than a pipe
/// holds (64 KiB) to the stream not being read stalled the test until the ten-minute kill. Both
/// happen with a command that echoes a large input, or logs much to standard error.
@Suite("running a command to its end: input and both outputs at once, of any size")
struct RiscBinaryTests {
    @Test("1 MiB in through cat and 1 MiB on standard error before the last of standard output", .timeLimit(.minutes(1)))
    func largeStreams() async throws {
        let input = String(repeating: "0123456789abcde\n", count: 65_536)  // 1 MiB
        let result = try await RiscBinary.run(
            ["-c", "cat; head -c 1048576 /dev/zero | tr '\\0' e >&2; echo end"], stdin: input,
            executable: URL(fileURLWithPath: "/bin/sh"))
        #expect(result.status == 0)
        #expect(result.stdout == input + "end\n")
        #expect(result.stderr.utf8.count == 1_048_576 && result.stderr.allSatisfy { $0 == "e" })
    }

    @Test("a command that stops reading its input early ends without taking the test process with it", .timeLimit(.minutes(1)))
    func inputNotRead() async throws {
        let result = try await RiscBinary.run(
            ["-c", "head -c 10 >/dev/null; echo read"], stdin: String(repeating: "x", count: 1_048_576),
            executable: URL(fileURLWithPath: "/bin/sh"))
        #expect(result.status == 0)
        #expect(result.stdout == "read\n")
    }
}
