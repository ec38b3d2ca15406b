import Foundation
import RISCCore
import RISCTestKit
import Testing

/// Issue 15 §4: `risc linking check-url` as built.
@Suite("risc linking check-url (the built binary)", .serialized)
struct LinkingCommandTests {
    static func link(_ redirect: String) -> String { AppFlipLink.make(redirect: redirect, state: "xyz") }

    @Test("an acceptable link gets its redirect; a look-alike none (exit 1); a user risc suspended gets unrecoverable")
    func checkURL() async throws {
        let google = "https://oauth-redirect.googleusercontent.com/a/com.google.Chromecast"
        let ok = try await RiscBinary.run(["linking", "check-url", Self.link(google), "--client-id", "google-client", "--code", "c-1"])
        #expect(ok.status == 0 && ok.stdout.contains("redirect: \(google)?code=c-1&state=xyz"), "\(ok.stdout) \(ok.stderr)")
        let evil = try await RiscBinary.run([
            "linking", "check-url", Self.link("https://oauth-redirect.googleusercontent.com.evil.example/a/com.google.Chromecast"),
            "--client-id", "google-client", "--code", "c-1", "--json",
        ])
        let verdict = try JSONParser.parseObject(Array(evil.stdout.utf8))
        #expect(evil.status == 1 && verdict["error"] == "invalid_request" && verdict["redirect"] == .null, "\(evil.stdout)")
        let denied = try await RiscBinary.run(["linking", "check-url", Self.link(google), "--client-id", "google-client", "--deny"])
        #expect(denied.status == 1 && denied.stdout.contains("?error=access_denied&"), "\(denied.stdout)")

        let data = Scratch.root.appendingPathComponent("risc-linking-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        #expect(try await RiscBinary.run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42"]).status == 0)
        let arguments = ["linking", "check-url", Self.link(google), "--client-id", "google-client", "--code", "c-1", "--user", "u42", "--data-dir", data]
        #expect(try await RiscBinary.run(arguments).status == 0)
        let replay = try await RiscBinary.run(["replay", "-", "--local", "--data-dir", data], stdin: #"{"type":"account-disabled","subject":"42"}"#)
        try #require(replay.status == 0, "\(replay.stdout) \(replay.stderr)")
        let suspended = try await RiscBinary.run(arguments)
        #expect(suspended.status == 1 && suspended.stdout.contains("unrecoverable"), "\(suspended.stdout)")
    }
}
