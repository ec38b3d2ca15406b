import Foundation
import RISCCore
import RISCTestKit
import Testing

/// The README's offline walk-through, run as written (ports moved to free ones below the ephemeral range, the built binary
/// on PATH): if a command, flag or expected answer in it drifts, this fails.
@Suite("README walk-through", .serialized)
struct WalkthroughTests {
    static func block() throws -> String {
        let readme = try String(contentsOf: RiscBinary.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        guard let marker = lines.firstIndex(where: { $0.hasPrefix("<!-- walkthrough") }),
            let open = lines[marker...].firstIndex(where: { $0.hasPrefix("```sh") }),
            let close = lines[(open + 1)...].firstIndex(where: { $0.hasPrefix("```") })
        else { throw CocoaError(.fileReadCorruptFile) }
        return lines[(open + 1)..<close].joined(separator: "\n")
    }

    @Test("completes offline in under a minute, and the account ends up revoked")
    func walkthrough() async throws {
        // Below the ephemeral range and the clusters' ports: no other test's outbound connection,
        // port-0 server or PostgreSQL takes one between this pick and the script's use of it.
        let first = try PostgresCluster.commandPorts(count: 3)
        let (issuer, port, admin) = (first, first + 1, first + 2)
        let script = try Self.block()
            .replacingOccurrences(of: "$PWD/.build/release", with: RiscBinary.url.deletingLastPathComponent().path)
            .replacingOccurrences(of: ":8780", with: ":\(issuer)").replacingOccurrences(of: "--port 8780", with: "--port \(issuer)")
            .replacingOccurrences(of: ":8443", with: ":\(port)").replacingOccurrences(of: ":9090", with: ":\(admin)")
        #expect(script.contains("risc serve") && !script.contains("8780") && !script.contains("8443"))
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        // The trap stops what the script left running; `|| true` because when the script's own
        // `kill` has already ended them, `jobs -p` is empty and a bare `kill` exits 2.
        process.arguments = ["60", "bash", "-e", "-c", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script]
        process.currentDirectoryURL = RiscBinary.repository
        var environment = ProcessInfo.processInfo.environment
        environment["RISC_LISTEN_PORT"] = "\(port)"
        environment["RISC_ADMIN_PORT"] = "\(admin)"
        // The block's `mktemp -d` (a reader's fresh folder) goes under this process's scratch.
        environment["TMPDIR"] = Scratch.root.path
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let start = Date()
        try process.run()
        let output = await BlockingPool.waits.run { String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        await process.exited()
        let elapsed = Date().timeIntervalSince(start)
        #expect(process.terminationStatus == 0, "\(output)")
        #expect(elapsed < 60)
        #expect(output.contains("202                       2"))
        #expect(output.contains("400 authentication_failed 1"))
        #expect(output.contains("refused, as it should be"))
        #expect(output.contains("suspend_google_signin"))
        #expect(output.contains(#""google_signin_enabled": false"#))
        #expect(output.contains(#""open": 0"#) && output.contains(#""ended": 1"#))
    }
}
