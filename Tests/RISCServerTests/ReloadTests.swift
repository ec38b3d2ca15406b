import Foundation
import Logging
import RISCClient
import RISCConfig
import RISCCore
import RISCSQLite
import RISCTestKit
import Synchronization
import Testing

@testable import RISCServer

/// Issue 26 §9: SIGHUP reopened the logs and reloaded TLS only; the log level, limits, retention
/// and the action table needed a restart.
@Suite("SIGHUP's configuration reload", .serialized)
struct ReloadTests {
    @Test("a reload applies the log level, limits, retention and the action table, names what waits for a restart, and refuses a configuration that does not check, keeping the running one")
    func reload() async throws {
        let next = Mutex<ReceiverConfiguration?>(nil)
        let harness = try ServerHarness { $0.maxBodyBytes = 64 * 1024 }
        harness.source = ConfigurationSource(load: { try #require(next.withLock { $0 }) })
        let level = LogLevelSetting(.notice)
        harness.logLevel = level
        _ = try await AccountStore(directory: harness.dataDirectory).link([
            .init(
                issuer: harness.issuer.baseURL, subject: "110169484474386276334", userID: "u-1", sessions: ["s-1", "s-2"])
        ])
        try await harness.start()
        let logger = Logger(label: "copy") { DiagnosticLogHandler(label: $0, level: level, format: .text) }
        let junk = String(repeating: "x", count: 3_000)
        #expect(try await harness.post(junk).status == 400)  // within the limit: refused as malformed

        var edited = harness.configuration
        edited.logLevel = .warning
        edited.maxBodyBytes = 2_048
        edited.retention = RetentionPolicy(done: 0)
        edited.actionTable.set(.sessionsRevoked, reason: "", actions: [.logOnly])
        edited.port = 1  // read at the start only
        next.withLock { $0 = edited }
        let result = try #require(harness.receiver.reloadConfiguration())
        #expect(result.problems.isEmpty)
        #expect(result.applied == ["max_body_bytes", "log.level", "retention.done", "actions.table"])
        #expect(result.needsRestart == ["listen.port"])
        #expect(logger.logLevel == .warning)  // every logger made with the setting
        #expect(try await harness.post(junk).status == 413)
        #expect(harness.receiver.reloader?.retention.policy.isOn == false)
        #expect(harness.receiver.currentConfiguration.port == harness.configuration.port)
        // The reloaded table: sessions-revoked now only logs, so both sessions stay open.
        #expect(try await harness.post(try harness.token(jti: "after-reload")).status == 202)
        let account = try #require(try await AccountStore(directory: harness.dataDirectory).accounts(subject: "110169484474386276334").first)
        #expect(account.openSessions == 2)
        #expect(harness.eventLogLines.contains { $0["step"] == "config" && $0["outcome"] == "reloaded" })

        var broken = edited
        broken.maxBodyBytes = 10
        broken.logLevel = .debug
        next.withLock { $0 = broken }
        let refused = try #require(harness.receiver.reloadConfiguration())
        #expect(refused.problems.contains { $0.contains("max_body_bytes") }, "\(refused.problems)")
        #expect(refused.applied.isEmpty)
        #expect(level.level == .warning)
        #expect(harness.receiver.currentConfiguration.maxBodyBytes == 2_048)
        #expect(try await harness.post(junk).status == 413)
        #expect(harness.eventLogLines.contains { $0["step"] == "config" && $0["outcome"] == "refused" })
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("issue 29: a reload applies a transmitter's action rows; its other settings wait for a restart, named transmitters.NAME")
    func transmitterRows() async throws {
        let okta = try TransmitterTests.SSFTransmitter()
        let next = Mutex<ReceiverConfiguration?>(nil)
        let harness = try ServerHarness { $0.transmitters = [okta.settings()] }
        harness.source = ConfigurationSource(load: { try #require(next.withLock { $0 }) })
        _ = try await AccountStore(directory: harness.dataDirectory).link([
            .init(issuer: okta.issuer.baseURL, subject: "ada", userID: "u-ada", sessions: ["s-1", "s-2"])
        ])
        try await harness.start()
        var edited = harness.configuration
        edited.actionTable.set(.sessionRevoked, reason: "", actions: [.logOnly], issuers: [okta.issuer.baseURL])
        edited.transmitters[0].path = "/events/okta"  // a push path: read at the start only
        next.withLock { $0 = edited }
        let result = try #require(harness.receiver.reloadConfiguration())
        #expect(result.problems.isEmpty, "\(result.problems)")
        #expect(result.applied == ["transmitters.okta.actions"])
        #expect(result.needsRestart == ["transmitters.okta"])
        // Okta's session-revoked now only logs: both sessions stay open; the path is still the old one.
        let token = try okta.token(jti: "okta-after-reload") {
            $0["sub_id"] = nil
            $0["events"] = .object([EventType.sessionRevoked.uri: ["subject": ["user": okta.factory.accountSubject("ada")]]])
        }
        #expect(try await harness.post(token).status == 202)
        let account = try #require(try await AccountStore(directory: harness.dataDirectory).accounts(subject: "ada").first)
        #expect(account.openSessions == 2)
        // Running again on what was in force: nothing to change, and nothing waits.
        next.withLock { $0 = harness.receiver.currentConfiguration }
        let again = try #require(harness.receiver.reloadConfiguration())
        #expect(again.applied.isEmpty && again.needsRestart.isEmpty, "\(again)")
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
    }

    @Test("a transmitter's push credential rotates on SIGHUP: a second line in authorization_file is accepted beside the first, then the old one is dropped")
    func pushCredentialRotation() async throws {
        let okta = try TransmitterTests.SSFTransmitter()
        let file = Scratch.root.appendingPathComponent("okta-push-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        func write(_ text: String) throws { try PrivateFiles.writeAtomically(file, Array(text.utf8)) }
        try write("Bearer old-credential-0123456789\n")
        let next = Mutex<ReceiverConfiguration?>(nil)
        let harness = try ServerHarness {
            $0.transmitters = [
                okta.settings {
                    $0.path = "/events/okta"
                    $0.authorizationFile = file
                }
            ]
        }
        harness.source = ConfigurationSource(load: { try #require(next.withLock { $0 }) })
        try await harness.start()
        next.withLock { $0 = harness.configuration }
        func push(_ value: String) async throws -> Int {
            try await harness.post(try okta.token(), path: "/events/okta", headers: [("Authorization", value)]).status
        }
        #expect(try await push("Bearer old-credential-0123456789") == 202)
        #expect(try await push("Bearer new-credential-0123456789") == 401)

        // The new value added, the stream told: either is accepted meanwhile.
        try write("Bearer old-credential-0123456789\nBearer new-credential-0123456789\n")
        let added = try #require(harness.receiver.reloadConfiguration())
        #expect(added.problems.isEmpty && added.applied == ["transmitters.okta.authorization_file"], "\(added)")
        #expect(try await push("Bearer new-credential-0123456789") == 202)
        #expect(try await push("Bearer old-credential-0123456789") == 202)

        // The old value removed.
        try write("Bearer new-credential-0123456789\n")
        #expect(try #require(harness.receiver.reloadConfiguration()).applied == ["transmitters.okta.authorization_file"])
        #expect(try await push("Bearer old-credential-0123456789") == 401)
        #expect(try await push("Bearer new-credential-0123456789") == 202)

        // A file that does not read (three lines) refuses the reload; the running values stay.
        try write("a\nb\nc\n")
        let refused = try #require(harness.receiver.reloadConfiguration())
        #expect(refused.problems.contains { $0.contains("authorization_file") }, "\(refused)")
        #expect(try await push("Bearer new-credential-0123456789") == 202)
        // Unchanged: nothing reported.
        try write("Bearer new-credential-0123456789\n")
        #expect(try #require(harness.receiver.reloadConfiguration()).applied.isEmpty)
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
    }
}
