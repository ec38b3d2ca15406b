import Foundation
import RISCCore
import RISCTestKit
import Synchronization
import Testing

/// `risc stream` as built, against the fake RISC API, with `risc serve` over HTTPS receiving the
/// verification SET the fake pushes: the whole round trip on loopback.
@Suite("risc stream (the built binary)", .serialized)
struct StreamCommandTests {
    /// A receiver's TLS certificate, a service account, and the fake RISC API that accepts it and
    /// pushes SETs signed with the repository's RS256 test key to receivers that trust the certificate.
    static func fakeGoogle(directory: URL) throws -> (TestCertificate, TestServiceAccount, KeyDirectory, FakeRISCAPI) {
        let certificate = try TestCertificate(directory: directory)
        let account = try TestServiceAccount(directory: directory)
        let keys = try KeyDirectory.repositoryTestKeys()
        var configuration = FakeRISCAPI.Configuration(
            clientEmail: account.clientEmail, keyID: account.keyID, publicKey: account.key.publicKey,
            issuer: SETFactory(signer: keys.entries.first { $0.algorithm == .rs256 }!.signer))
        configuration.deliveryCABundle = certificate.certificatePath
        return (certificate, account, keys, try FakeRISCAPI(configuration: configuration))
    }

    /// Found: `risc stream update --url` took a URL with a space in its host or port 0 (Google
    /// answered), and one whose path the receiver does not serve (`https://HOST/`, or `/events`
    /// with `events_path = "/risc/events"`) without a word: every push would then get 404.
    @Test("stream update refuses a URL no one can reach and says when its path is not the receiver's events_path")
    func updateURLChecks() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-stream-url-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (_, account, _, api) = try Self.fakeGoogle(directory: directory)
        defer { api.stop() }
        let common = ["--credentials", account.path, "--api-base", api.baseURL]
        for url in ["https://exa mple.com/events", "https://example.com:0/events"] {
            let refused = try await RiscBinary.run(["stream", "update", "--url", url] + common)
            #expect(refused.status == 64 && refused.stderr.contains("--url: "), "\(url): \(refused.status) \(refused.stderr)")
        }
        let root = try await RiscBinary.run(["stream", "update", "--url", "https://localhost:1/"] + common)
        #expect(root.status == 0 && root.stderr.contains("serves events at /events (events_path)"), "\(root.stderr)")
        let config = directory.appendingPathComponent("risc.toml").path
        try "audiences = [\"a\"]\nevents_path = \"/risc/events\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let other = try await RiscBinary.run(["stream", "update", "--url", "https://localhost:1/events", "--config", config] + common)
        #expect(other.status == 0 && other.stderr.contains("serves events at /risc/events (events_path)"), "\(other.stderr)")
        let matching = try await RiscBinary.run(["stream", "update", "--url", "https://localhost:1/risc/events", "--config", config] + common)
        #expect(matching.status == 0 && !matching.stderr.contains("events_path"), "\(matching.stderr)")
    }

    @Test("update, show, status, disable/enable, verify --wait round trip to risc serve over HTTPS; diagnosis on timeout")
    func roundTrip() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-stream-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (certificate, account, keys, api) = try Self.fakeGoogle(directory: directory)
        defer { api.stop() }
        let (serve, data, port, _) = try await ServeCommandTests.startServe(extra: [
            "--tls-cert", certificate.certificatePath, "--tls-key", certificate.keyPath,
        ])
        defer { serve.terminate() }
        let common = ["--credentials", account.path, "--api-base", api.baseURL]
        func stream(_ arguments: [String]) async throws -> RiscBinary.Result {
            try await RiscBinary.run(["stream"] + arguments + common)
        }

        // Nothing registered yet: Google's 404 with the fix, exit 1.
        let missing = try await stream(["show"])
        #expect(missing.status == 1 && missing.stderr.contains("risc stream update"), "\(missing.stderr)")

        let url = "https://localhost:\(port)/events"
        let update = try await stream(["update", "--url", url])
        #expect(update.status == 0, "\(update.stderr)")
        let show = try await stream(["show"])
        #expect(show.stdout.contains("push → \(url)"))
        #expect(show.stdout.contains("requested: sessions-revoked, tokens-revoked, token-revoked, account-disabled, account-enabled, account-credential-change-required, verification"))
        #expect(try await stream(["status", "--json"]).stdout.contains(#"{"status":"enabled"}"#))

        // Disabled: Google sends nothing; the wait times out and says why.
        #expect(try await stream(["disable"]).status == 0)
        let timedOut = try await stream(["verify", "--wait", "1s", "--data-dir", data.path])
        #expect(timedOut.status == 1)
        #expect(timedOut.stdout.contains("the stream is disabled: run `risc stream enable`"), "\(timedOut.stdout)")
        #expect(timedOut.stdout.contains("no SET at all reached the receiver"))

        #expect(try await stream(["enable"]).status == 0)
        let verified = try await stream(["verify", "--wait", "20s", "--data-dir", data.path, "--state", "round-trip-1"])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        if ProcessInfo.processInfo.environment["SHOW_STREAM_OUTPUT"] != nil { print(timedOut.stdout + verified.stdout + missing.stderr) }
        #expect(verified.stdout.contains("verification SET received after"))
        #expect(verified.stdout.contains("RS256 with kid \(keys.entries.first { $0.algorithm == .rs256 }!.keyID)"))
        #expect(verified.stdout.contains("issuer     https://accounts.google.com/"))
        #expect(verified.stdout.contains("audience   \(SETFactory.defaultAudience)"))
        // The receiver stored the SET (what the command waits for) before the fake Google read its
        // 202: that answer is recorded once its own POST returns.
        _ = await waitWhile { !api.state.withLock({ $0.deliveries }).contains(202) }
        #expect(api.state.withLock { $0.deliveries }.contains(202))
        // The event log is flushed every 100 ms by its own thread: give it a moment.
        var log = ""
        _ = await waitWhile {
            log = (try? String(contentsOf: data.appendingPathComponent("events.log"), encoding: .utf8)) ?? ""
            return !log.contains(#""state":"round-trip-1""#)
        }
        #expect(log.contains(#""step":"verification","outcome":"matched""#) && log.contains(#""state":"round-trip-1""#))

        // JSON output, and a refusal with its advice.
        let json = try await stream(["verify", "--wait", "20s", "--data-dir", data.path, "--json"])
        let object = try JSONParser.parseObject(Array(json.stdout.utf8))
        #expect(object["matched"] == true && object["alg"]?.stringValue == "RS256")
        api.state.withLock { $0.forcedError = (403, "The delivery endpoint does not belong to any of your project's domains.") }
        let refused = try await stream(["update", "--url", "https://risc.example.org/events", "--events", "sessions-revoked,verification", "--json"])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains(#""status":403"#) && refused.stdout.contains("authorized domains"))
        api.state.withLock { $0.forcedError = nil }
        #expect(try await stream(["update", "--url", url, "--events", "nonsense"]).status == 64)
        // Found: an http:// URL passed the check that says it must be https:// (Google pushes to
        // an HTTPS endpoint only): it went to Google. Refused here, before any call.
        let plain = try await stream(["update", "--url", "http://risc.example.org/events"])
        #expect(plain.status == 64 && plain.stderr.contains("--url must be an absolute https:// URL"), "\(plain.status) \(plain.stderr)")
        // No --url at all (or a misspelt option in its place) says what to give, not that it is malformed.
        let noURL = try await stream(["update"])
        #expect(noURL.status == 64 && noURL.stderr.contains("give --url, the receiver's public https:// URL"), "\(noURL.status) \(noURL.stderr)")
        let unreadable = try await RiscBinary.run(["stream", "show", "--credentials", "/nonexistent", "--api-base", api.baseURL])
        #expect(unreadable.status == 64 && unreadable.stderr.contains("/nonexistent: cannot read it: No such file or directory"), "\(unreadable.stderr)")
        #expect(try await RiscBinary.run(["stream", "show", "--credentials", account.path, "--api-base", "http://example.com"]).status == 64)
        // The key file is never echoed.
        #expect(!(missing.stderr + update.stdout + verified.stdout + timedOut.stdout).contains("PRIVATE KEY"))
    }
}
