import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

/// Issue 29: transmitters beside Google, as configuration.
@Suite("transmitters beside Google", .serialized)
struct TransmitterTests {
    static let oktaAudience = "https://risc.example.com/okta"

    /// An SSF transmitter on loopback with a key of its own (ES256), and what signs its SETs.
    struct SSFTransmitter {
        let issuer: LocalIssuer
        let factory: SETFactory
        /// Its JWK Set, as its issuer serves it.
        let jwks: String

        init() throws {
            let key = try PrivateKey.generate(.ec(curve: "P-256"))
            let jwk = key.publicKey.jwk(keyID: "okta-1", algorithm: .es256)
            jwks = JSONValue.object(["keys": .array([.object(jwk)])]).serialized
            issuer = try LocalIssuer(jwks: jwks)
            factory = SETFactory(issuer: issuer.baseURL, audience: TransmitterTests.oktaAudience, signer: JWSSigner(key: key, algorithm: .es256, keyID: "okta-1"))
        }

        /// A CAEP session-revoked SET about `email`, typed as SSF requires unless told otherwise.
        func token(jti: String = UUID().uuidString, typed: Bool = true, edit: (inout JSONObject) -> Void = { _ in }) throws -> String {
            var claims = factory.claims(type: .sessionRevoked, subject: nil, jti: jti)
            claims["sub_id"] = ["format": "email", "email": "ada@example.com"]
            edit(&claims)
            return try factory.sign(claims, header: typed ? ["typ": "secevent+jwt"] : JSONObject())
        }

        /// An SSF verification SET about stream `stream`, echoing `state` when given.
        func verification(state: String?, stream: String = "stream-1", jti: String = UUID().uuidString) throws -> String {
            var claims = factory.claims(type: .ssfVerification, subject: nil, extra: state.map { ["state": .string($0)] } ?? JSONObject(), jti: jti)
            claims["sub_id"] = ["format": "opaque", "id": .string(stream)]
            return try factory.sign(claims, header: ["typ": "secevent+jwt"])
        }

        func settings(_ edit: (inout TransmitterSettings) -> Void = { _ in }) -> TransmitterSettings {
            var settings = TransmitterSettings(name: "okta")
            settings.issuer = issuer.baseURL
            settings.audiences = [TransmitterTests.oktaAudience]
            settings.algorithms = ["ES256"]
            edit(&settings)
            return settings
        }
    }

    static func error(_ response: HTTPResponse) -> String? {
        (try? JSONParser.parseObject(response.body))?["err"]?.stringValue
    }

    /// Found: a transmitter's secret file that could not be read was only "cannot read FILE".
    @Test("a transmitter's file that cannot be read is named with its setting and the reason")
    func unreadableSecret() throws {
        let error = #expect(throws: TransmitterSettings.FileError.self) { try TransmitterSettings.secret("/nonexistent/okta-auth", "authorization_file", of: "okta") }
        #expect(error?.description == "transmitters.okta.authorization_file: cannot read /nonexistent/okta-auth: No such file or directory")
    }

    @Test("on the shared path each SET is verified by the transmitter its iss names; SSF requires typ")
    func sharedPath() async throws {
        let okta = try SSFTransmitter()
        // Google's issuer named, as its own discovery document gives it: an iss naming neither is refused as such.
        let google = try LocalIssuer(jwks: String(decoding: ServerHarness.keys.jwksData, as: UTF8.self))
        let harness = try ServerHarness(issuer: google) {
            $0.issuer = google.baseURL
            $0.transmitters = [okta.settings()]
        }
        try await harness.start()
        // Google's, as ever; Okta's by its own keys (found through its ssf-configuration).
        #expect(try await harness.post(try harness.token(jti: "google-1")).status == 202)
        let accepted = try await harness.post(try okta.token(jti: "okta-1"))
        #expect(accepted.status == 202, "\(String(decoding: accepted.body, as: UTF8.self))")
        #expect(okta.issuer.requests(to: "/.well-known/ssf-configuration") >= 1)
        let line = try #require(harness.eventLogLines.first { $0["jti"] == "okta-1" && $0["step"] == "received" })
        #expect(line["transmitter"] == "okta" && line["outcome"] == "accepted")
        #expect(harness.eventLogLines.first { $0["jti"] == "google-1" && $0["step"] == "received" }?["transmitter"] == "google")

        // SSF: no typ is refused; Google's dialect still takes a SET without one (the first above).
        let untyped = try await harness.post(try okta.token(jti: "okta-untyped", typed: false))
        #expect(untyped.status == 400 && Self.error(untyped) == "invalid_request")
        // An iss naming no transmitter, and one naming Okta with Google's audience.
        let stranger = try await harness.post(try okta.token { $0["iss"] = "https://idp.example.net" })
        #expect(stranger.status == 400 && Self.error(stranger) == "invalid_issuer")
        #expect(!String(decoding: stranger.body, as: UTF8.self).contains(okta.issuer.baseURL))
        let wrongAudience = try await harness.post(try okta.token { $0["aud"] = .string(SETFactory.defaultAudience) })
        #expect(wrongAudience.status == 400 && Self.error(wrongAudience) == "invalid_audience")
        // A SET naming Okta but signed with Google's key: Okta's keys do not have it.
        let borrowed = try await harness.post(try harness.token { $0["iss"] = .string(okta.issuer.baseURL) })
        #expect(borrowed.status == 400 && Self.error(borrowed) != nil)

        // Readiness names each transmitter's key set.
        let ready = try JSONParser.parseObject(try await harness.get(harness.adminURL + "/readyz").body)
        #expect(ready["transmitters"]?.objectValue?["okta"]?.objectValue?["usable"] == true)
        #expect(ready["transmitters"]?.objectValue?["google"]?.objectValue?["usable"] == true)
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
    }

    /// Found: a transmitter served with a certificate from an organisation's own CA (an in-house
    /// Keycloak) could be used only once that CA was in the system's trust store, where it then
    /// vouched for every host risc fetches from, Google's key hosts among them. `ca_file` trusts a
    /// CA for the transmitter's metadata, keys, token endpoint and polls alone.
    @Test("a transmitter's ca_file: its keys are fetched over HTTPS from a server the organisation's own CA certified; without it they are not")
    func transmitterPrivateCA() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-transmitter-ca-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory.appendingPathComponent("tls"))
        // The transmitter's documents, served by `openssl s_server -WWW` over HTTPS from a folder.
        let okta = try SSFTransmitter()
        let site = directory.appendingPathComponent("site")
        try FileManager.default.createDirectory(at: site.appendingPathComponent(".well-known"), withIntermediateDirectories: true)
        let port = try PostgresCluster.freePort()
        let issuer = "https://localhost:\(port)"
        let metadata: JSONValue = ["issuer": .string(issuer), "jwks_uri": .string(issuer + "/jwks.json")]
        try Data(metadata.serialized.utf8).write(to: site.appendingPathComponent(".well-known/ssf-configuration"))
        try Data(okta.jwks.utf8).write(to: site.appendingPathComponent("jwks.json"))
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["openssl", "s_server", "-quiet", "-accept", "127.0.0.1:\(port)", "-cert", certificate.certificatePath, "-key", certificate.keyPath, "-WWW"]
        server.currentDirectoryURL = site
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.killGroupAndWait() }
        for trusted in [false, true] {
            let harness = try ServerHarness {
                $0.transmitters = [
                    okta.settings {
                        $0.issuer = issuer
                        if trusted { $0.caFile = certificate.certificatePath }
                    }
                ]
            }
            try await harness.start()
            var usable: Bool?
            _ = await waitWhile {
                let ready = try? JSONParser.parseObject(try await harness.get(harness.adminURL + "/readyz").body)
                usable = ready?["transmitters"]?.objectValue?["okta"]?.objectValue?["usable"]?.boolValue
                return usable == nil || (trusted && usable == false)
            }
            #expect(usable == trusted, "trusted: \(trusted)")
            try await harness.stop()
            harness.issuer.stop()
        }
        okta.issuer.stop()
    }

    @Test("a transmitter on a path of its own must push with the Authorization value risc gave it: else 401")
    func ownPathAndAuthorization() async throws {
        let okta = try SSFTransmitter()
        let secretFile = Scratch.root.appendingPathComponent("okta-push-\(UUID().uuidString)").path
        try "Bearer push-credential-0123456789\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile)
        let harness = try ServerHarness {
            $0.transmitters = [
                okta.settings {
                    $0.path = "/events/okta"
                    $0.authorizationFile = secretFile
                }
            ]
        }
        try await harness.start()
        let token = try okta.token(jti: "okta-own")
        for authorization in [nil, "Bearer push-credential-012345678", "Bearer push-credential-0123456789x", "Bearer PUSH-CREDENTIAL-0123456789", "Bearerpush-credential-0123456789"] {
            let refused = try await harness.post(token, path: "/events/okta", headers: authorization.map { [("Authorization", $0)] } ?? [])
            #expect(refused.status == 401, "\(authorization ?? "none")")
            #expect(Self.error(refused) == "authentication_failed")
            #expect(refused.header("www-authenticate") == "Bearer" && refused.header("content-type") == "application/json")
        }
        let refusal = try #require(harness.eventLogLines.last { $0["err"] == "authentication_failed" })
        #expect(!JSONValue.object(refusal).serialized.contains("push-credential"))
        let accepted = try await harness.post(token, path: "/events/okta", headers: [("Authorization", "Bearer push-credential-0123456789")])
        #expect(accepted.status == 202)
        // Found: "bearer …" was refused. RFC 9110 §11.1: the scheme is case-insensitive, and one or
        // more spaces part it from the credentials (§11.4); the credentials themselves are compared exactly.
        for (index, authorization) in ["bearer push-credential-0123456789", "BEARER  push-credential-0123456789"].enumerated() {
            let other = try await harness.post(try okta.token(jti: "okta-scheme-\(index)"), path: "/events/okta", headers: [("Authorization", authorization)])
            #expect(other.status == 202, "\(authorization)")
        }
        // Each path serves its own: Okta's SET on Google's path is Google's to judge, and the reverse.
        #expect(try await harness.post(try okta.token(), path: "/events").status == 400)
        let googleOnOkta = try await harness.post(try harness.token(), path: "/events/okta", headers: [("Authorization", "Bearer push-credential-0123456789")])
        #expect(googleOnOkta.status == 400)
        #expect(try await harness.post(try harness.token(), path: "/events").status == 202)
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
        try? FileManager.default.removeItem(atPath: secretFile)
    }

    @Test("an SSF verification echoing a state risc did not ask for is refused invalid_state; one without state, or with a state asked for (behind queued events too), gets 202")
    func verificationState() async throws {
        let okta = try SSFTransmitter()
        let harness = try ServerHarness { $0.transmitters = [okta.settings()] }
        try await harness.start()
        let refused = try await harness.post(try okta.verification(state: "never-asked", jti: "v-unasked"))
        #expect(refused.status == 400 && Self.error(refused) == "invalid_state" && refused.header("content-language") == "en")
        #expect(try await harness.post(try okta.verification(state: nil, jti: "v-unsolicited")).status == 202)
        try await harness.receiver.storage.store.verifications().request(state: "asked-7", apiBase: okta.issuer.baseURL, now: Date().timeIntervalSince1970)
        for index in 0..<3 { #expect(try await harness.post(try okta.token(jti: "queued-\(index)")).status == 202) }
        #expect(try await harness.post(try okta.verification(state: "asked-7", jti: "v-asked")).status == 202)
        // A redelivery of the same SET is still 202.
        #expect(try await harness.post(try okta.verification(state: "asked-7", jti: "v-asked")).status == 202)
        let matched = { harness.eventLogLines.contains { $0["step"] == "verification" && $0["jti"] == "v-asked" && $0["outcome"] == "matched" } }
        _ = await waitWhile { !matched() }
        #expect(matched(), "\(harness.eventLogLines.filter { $0["step"] == "verification" })")
        #expect(harness.eventLogLines.contains { $0["jti"] == "v-unasked" && $0["err"] == "invalid_state" })
        // Google's dialect is as before: an unrequested state is accepted and logged as such.
        #expect(
            try await harness.post(try harness.token(jti: "g-verify", type: .verification) { claims in claims["events"] = .object([EventType.verification.uri: ["state": "unasked"]]) }).status == 202)
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
    }

    @Test("with only other transmitters configured there is no Google, and the shared path takes theirs")
    func withoutGoogle() async throws {
        let okta = try SSFTransmitter()
        let harness = try ServerHarness {
            $0.audiences = []
            $0.transmitters = [okta.settings()]
        }
        try await harness.start()
        #expect(try await harness.post(try okta.token()).status == 202)
        #expect(try await harness.post(try harness.token()).status == 400)
        try await harness.stop()
        harness.issuer.stop()
        okta.issuer.stop()
    }

    @Test("a transmitter's action rows answer for its SETs only")
    func actionRows() async throws {
        let okta = try SSFTransmitter()
        var table = ActionTable.default
        table.set(.sessionsRevoked, reason: "", actions: [.flagForReview], issuers: [okta.issuer.baseURL + "/"])
        let google = SETFactory(signer: ServerHarness.keys.entry(for: .rs256)!.signer)
        func plan(_ factory: SETFactory) throws -> [Action] {
            let claims = factory.claims(type: .sessionsRevoked, subject: factory.accountSubject("1"))
            return ActionPlan.plan(for: try SecurityEventToken(payload: Array(JSONValue.object(claims).serialized.utf8)), table: table, now: 1_800_000_000).steps[0].actions
        }
        #expect(try plan(okta.factory) == [.flagForReview])
        #expect(try plan(google) == [.endSessions])
        okta.issuer.stop()
    }

    @Test("CAEP events by default: session-revoked ends the named session; the member that says what changed is the reason column")
    func caepDefaults() throws {
        let factory = SETFactory(signer: ServerHarness.keys.entry(for: .rs256)!.signer)
        func actions(_ type: EventType, _ extra: JSONObject = JSONObject()) throws -> [Action] {
            let claims = factory.claims(type: type, subject: ["format": "email", "email": "ada@example.com"], extra: extra)
            return ActionPlan.plan(for: try SecurityEventToken(payload: Array(JSONValue.object(claims).serialized.utf8)), table: .default, now: 1_800_000_000).steps[0].actions
        }
        #expect(try actions(.sessionRevoked) == [.endSession])
        #expect(try actions(.credentialChange, ["credential_type": "password", "change_type": "update"]) == [.heightenMonitoring])
        #expect(try actions(.deviceComplianceChange, ["current_status": "not-compliant", "previous_status": "compliant"]) == [.heightenMonitoring])
        #expect(try actions(.deviceComplianceChange, ["current_status": "compliant", "previous_status": "not-compliant"]) == [.logOnly])
        #expect(try actions(.riskLevelChange, ["current_level": "high", "previous_level": "low"]) == [.heightenMonitoring])
        #expect(try actions(.tokenClaimsChange, ["claims": ["role": "ro-admin"]]) == [.logOnly])
        var table = ActionTable.default
        table.set(.deviceComplianceChange, reason: "not-compliant", actions: [.endSession])
        let claims = factory.claims(type: .deviceComplianceChange, subject: ["format": "email", "email": "a@example.com"], extra: ["current_status": "not-compliant"])
        let plan = ActionPlan.plan(for: try SecurityEventToken(payload: Array(JSONValue.object(claims).serialized.utf8)), table: table, now: 1_800_000_000)
        #expect(plan.steps[0].actions == [.endSession] && plan.steps[0].recordedReason == "device-compliance-change:not-compliant")
        // The ordering rule's clock: toe, else CAEP's event_timestamp, else iat.
        var timed = factory.claims(type: .sessionRevoked, subject: ["format": "email", "email": "a@example.com"], extra: ["event_timestamp": 1_700_000_000], iat: 1_800_000_000)
        func time(_ claims: JSONObject) throws -> Double {
            ActionPlan.plan(for: try SecurityEventToken(payload: Array(JSONValue.object(claims).serialized.utf8)), table: .default, now: 1_800_000_000).eventTime
        }
        #expect(try time(timed) == 1_700_000_000)
        timed["toe"] = 1_600_000_000
        #expect(try time(timed) == 1_600_000_000)
        #expect(try time(factory.claims(type: .sessionRevoked, subject: ["format": "email", "email": "a@example.com"], iat: 1_800_000_000)) == 1_800_000_000)
    }
}
