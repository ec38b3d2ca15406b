import Foundation
import RISCCore
import RISCTestKit
import Testing

@Suite("risc replay (the built binary)", .serialized)
struct ReplayCommandTests {
    /// The value of a summary row (`label` then spaces then the value).
    func row(_ output: String, _ label: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(label + " ") }
            .map { $0.dropFirst(label.count).trimmingCharacters(in: .whitespaces) }
    }

    @Test("replays files, signed descriptions and stored SETs; summary and exit status reflect the answers")
    func replay() async throws {
        let (process, data, port, _) = try await ServeCommandTests.startServe()
        defer { process.terminate() }
        let url = "http://127.0.0.1:\(port)/events"
        let sample = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let wrongAud = try RiscBinary.run(["sign", "--negative", "wrong-aud"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let file = data.path + "-tokens"
        try Data([sample, wrongAud, sample].joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        let mixed = try RiscBinary.run(["replay", file, "--to", url, "--concurrency", "2"])
        #expect(mixed.status == 1)
        #expect(row(mixed.stdout, "sent") == "3")
        #expect(row(mixed.stdout, "202") == "2")
        #expect(row(mixed.stdout, "400 invalid_audience") == "1")

        let descriptions = [
            #"{"type":"sessions-revoked","subject":"42","jti":"replay-1"}"#,
            #"{"type":"account-disabled","reason":"bulk-account","subject":"43"}"#,
            #"{"type":"verification","state":"hello"}"#,
        ].joined(separator: "\n")
        let signed = try RiscBinary.run(["replay", "-", "--to", url, "--rate", "50"], stdin: descriptions)
        #expect(signed.status == 0, "\(signed.stdout) \(signed.stderr)")
        #expect(row(signed.stdout, "202") == "3")

        let stored = try RiscBinary.run(["replay", "--from-store", "--data-dir", data.path, "--jti", "replay-1", "--to", url])
        #expect(stored.status == 0 && row(stored.stdout, "sent") == "1")
        #expect(try RiscBinary.run(["replay", "--from-store", "--data-dir", data.path, "--dead", "--to", url]).status != 0)

        let dry = try RiscBinary.run(["replay", file, "--dry-run", "--jwks-file", "keys/test/jwks.json"])
        #expect(dry.status == 1)  // the wrong-aud token does not verify
        #expect(dry.stdout.contains(#""actions":["end_sessions","suspend_google_signin"]"#))
        #expect(dry.stdout.contains("invalid_audience"))
        #expect(try RiscBinary.run(["replay", file]).status == 64)
    }
}
