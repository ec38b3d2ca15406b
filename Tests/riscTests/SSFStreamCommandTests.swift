import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

/// `risc stream … --transmitter NAME` as built, against `SSFTestTransmitter` (what `risc dev-issuer
/// --ssf` serves), with `risc serve` receiving its pushes: issue 29's stream management end to end.
@Suite("risc stream --transmitter (the built binary)", .serialized)
struct SSFStreamCommandTests {
    @Test("--check-config names each transmitter, and says there is no Google without audiences")
    func checkConfig() async throws {
        let path = Scratch.root.appendingPathComponent("risc-ssf-only-\(UUID().uuidString).toml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "[transmitters.okta]\nissuer = \"https://example.okta.com\"\naudiences = [\"https://risc.example.com/okta\"]\npath = \"/events/okta\"\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let checked = try await RiscBinary.run(["serve", "--config", path, "--check-config"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.contains("google    none (no audiences"))
        #expect(checked.stdout.contains("transmitter okta: ssf, https://example.okta.com, push to /events/okta, keys https://example.okta.com/.well-known/ssf-configuration"))
        #expect(checked.stdout.contains("actions   embedded account store\n"))

        // With the webhook chosen row by row, the accounts still take every other event.
        let secret = path + ".webhook-secret"
        defer { try? FileManager.default.removeItem(atPath: secret) }
        try PrivateFiles.writeAtomically(secret, [UInt8](repeating: 7, count: 32))
        try """
        [webhook]
        url = "https://hooks.example/revoke"
        secret_file = "\(secret)"
        scope = "rows"
        [transmitters.okta]
        issuer = "https://example.okta.com"
        audiences = ["https://risc.example.com/okta"]
        [transmitters.okta.actions.credential-change]
        "" = ["heighten_monitoring", "webhook"]

        """.write(toFile: path, atomically: true, encoding: .utf8)
        let rows = try await RiscBinary.run(["serve", "--config", path, "--check-config"])
        #expect(rows.status == 0, "\(rows.stderr)")
        #expect(rows.stdout.contains("actions   embedded account store; webhook https://hooks.example/revoke for the events whose row names it"), "\(rows.stdout)")
    }

    @Test("create, show, update, replace, status, pause, enable, subjects, verify, status with the last stream-updated, delete; an answer naming another iss stops the stream")
    func lifecycle() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-ssf-stream-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/ssf", clients: [.init(id: "risc-cli", secret: "cli-secret-0123")])
        defer { transmitter.stop() }
        for (name, text) in [("secret", "cli-secret-0123\n"), ("push", "Bearer push-credential-cli\n")] {
            let path = directory.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        }
        func config(receiver: String) throws -> String {
            let path = directory.appendingPathComponent("risc.toml").path
            try """
            [transmitters.ssf-test]
            issuer = "\(transmitter.issuer)"
            audiences = ["https://risc.example.com/ssf"]
            algorithms = ["ES256"]
            path = "/events/ssf"
            authorization_file = "\(directory.appendingPathComponent("push").path)"
            receiver_url = "\(receiver)"
            token_endpoint = "\(transmitter.tokenURL)"
            client_id = "risc-cli"
            client_auth = "client_secret_post"
            client_secret_file = "\(directory.appendingPathComponent("secret").path)"

            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let configPath = try config(receiver: "http://127.0.0.1:1/events/ssf")
        let (serve, data, port, _) = try await ServeCommandTests.startServe(extra: ["--config", configPath])
        defer { serve.terminate() }
        _ = try config(receiver: "http://127.0.0.1:\(port)/events/ssf")
        func stream(_ arguments: [String]) async throws -> RiscBinary.Result {
            try await RiscBinary.run(["stream"] + arguments + ["--transmitter", "ssf-test", "--config", configPath, "--data-dir", data.path])
        }

        let none = try await stream(["show"])
        #expect(none.status == 64 && none.stderr.contains("risc stream create --transmitter ssf-test"), "\(none.stderr)")
        let created = try await stream(["create"])
        #expect(created.status == 0, "\(created.stderr)")
        let streamID = try #require(transmitter.withState { $0.streams.keys.first })
        #expect(created.stdout.contains("stream:    \(streamID)") && created.stdout.contains("push → http://127.0.0.1:\(port)/events/ssf"))
        #expect(transmitter.withState { $0.streams[streamID]?["delivery"]?.objectValue?["authorization_header"] } == "Bearer push-credential-cli")
        #expect(transmitter.withState { $0.clientAuthentications.first } == "risc-cli client_secret_post")
        #expect(try await stream(["show"]).stdout.contains("requested: session-revoked"))
        let updated = try await stream(["update", "--events", "session-revoked,verification"])
        #expect(updated.status == 0 && updated.stdout.contains("requested: session-revoked, verification"), "\(updated.stderr)")
        // The push credential rotated: the new value added as a second line, risc serve told (SIGHUP,
        // then either is accepted), the stream replaced with the new one (the last line).
        try PrivateFiles.writeAtomically(directory.appendingPathComponent("push").path, Array("Bearer push-credential-cli\nBearer push-credential-next\n".utf8))
        serve.signal(SIGHUP)
        let log = data.appendingPathComponent("events.log").path
        let reloaded = await waitWhile {
            !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("transmitters.ssf-test.authorization_file")
        }
        #expect(reloaded, "no reload line naming the push credential")
        #expect(try await stream(["replace"]).status == 0)
        #expect(transmitter.withState { $0.streams[streamID]?["delivery"]?.objectValue?["authorization_header"] } == "Bearer push-credential-next")
        #expect(try await stream(["status", "--json"]).stdout.contains(#""status":"enabled""#))
        #expect(try await stream(["pause"]).status == 0 && transmitter.withState { $0.statuses[streamID] } == "paused")
        #expect(try await stream(["enable"]).status == 0 && transmitter.withState { $0.statuses[streamID] } == "enabled")
        #expect(try await stream(["subjects", "add", "--subject", #"{"format":"email","email":"ada@example.com"}"#]).status == 0)
        #expect(transmitter.withState { $0.subjects[streamID]?.count } == 1)

        // Verification: the state recorded in the receiver's store first, so the receiver takes it (202).
        let verified = try await stream(["verify", "--wait", "30s"])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        #expect(transmitter.withState { $0.pushes } == [202])

        // The transmitter's stream-updated, as risc stream status shows it.
        try transmitter.emit(.streamUpdated, subject: ["format": "opaque", "id": .string(streamID)], extra: ["status": "paused", "reason": "maintenance"], stream: streamID)
        _ = await waitWhile { transmitter.withState { $0.pushes.count } < 2 }
        #expect(transmitter.withState { $0.pushes } == [202, 202])
        let status = try await stream(["status"])
        #expect(status.stdout.contains("last stream-updated: paused (maintenance)"), "\(status.stdout) \(status.stderr)")

        #expect(try await stream(["delete"]).status == 0 && transmitter.withState { $0.streams.isEmpty })
        #expect(try await stream(["show"]).status == 64)

        // An answer naming another issuer: the stream is not used again, and the command says so.
        #expect(try await stream(["create"]).status == 0)
        transmitter.withState { $0.answerIssuer = "https://impostor.example" }
        let mismatch = try await stream(["show"])
        #expect(mismatch.status == 1 && mismatch.stderr.contains("not used again"), "\(mismatch.stderr)")
        let calls = transmitter.withState { $0.requests.count }
        let refused = try await stream(["delete"])
        #expect(refused.status == 64 && refused.stderr.contains("no longer used"), "\(refused.stderr)")
        #expect(transmitter.withState { $0.requests.count } == calls, "no call on a stopped stream")
    }
}
