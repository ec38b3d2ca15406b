import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

/// The OpenID conformance suite's SSF receiver modules (`../shared/docs/ssf.md` §3), push
/// delivery, each a test named after its module: risc's receiver and its SSF stream client against
/// `SSFTestTransmitter`, a real SSF transmitter on loopback.
@Suite("SSF receiver conformance (push)", .serialized)
struct SSFConformanceTests {
    static let audience = "https://risc.example.com/ssf"
    static let pushAuthorization = "Bearer push-credential-for-ssf-test"

    /// A transmitter, a receiver that takes its SETs on `/events/ssf`, and a stream client.
    final class Fixture: @unchecked Sendable {  // reason: set up once, then read by one test
        let transmitter: SSFTestTransmitter
        let harness: ServerHarness
        let client: SSFStreamClient
        let secretFile: String
        var streamID = ""

        init(authorization: SSFAuthorization? = nil, clock: TestClock? = nil) async throws {
            let testClock = clock ?? TestClock(Date().timeIntervalSince1970)
            let now = testClock.function
            let transmitter = try SSFTestTransmitter(
                audience: SSFConformanceTests.audience, clients: [SSFTestTransmitter.Client(id: "risc-client", secret: "s3cret-client")], clock: now)
            self.transmitter = transmitter
            secretFile = Scratch.root.appendingPathComponent("ssf-push-\(UUID().uuidString)").path
            try SSFConformanceTests.pushAuthorization.write(toFile: secretFile, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile)
            let secretFile = self.secretFile
            harness = try ServerHarness {
                var settings = TransmitterSettings(name: "ssf-test")
                settings.issuer = transmitter.issuer
                settings.audiences = [SSFConformanceTests.audience]
                settings.algorithms = ["ES256"]
                settings.path = "/events/ssf"
                settings.authorizationFile = secretFile
                $0.transmitters = [settings]
            }
            try await harness.start()
            client = SSFStreamClient(
                issuer: transmitter.issuer, metadataURL: transmitter.metadataURL,
                authorization: authorization
                    ?? .clientCredentials(.init(tokenURL: transmitter.tokenURL, clientID: "risc-client", method: .clientSecretBasic, secret: "s3cret-client")),
                http: .patient(), clock: now)
        }

        /// Creates a push stream to the receiver, as `risc stream create --transmitter` does.
        @discardableResult
        func create(events: [EventType] = EventType.ssfSupported) async throws -> JSONObject {
            let stream = try await client.create([
                "delivery": ["method": .string(SSFDelivery.push), "endpoint_url": .string(harness.publicURL + "/events/ssf"), "authorization_header": .string(SSFConformanceTests.pushAuthorization)],
                "events_requested": .array(events.map { .string($0.uri) }), "description": "risc conformance",
            ])
            streamID = try #require(stream["stream_id"]?.stringValue)
            return stream
        }

        /// The statuses the receiver answered the transmitter's pushes with, once `count` came back.
        func pushes(_ count: Int) async -> [Int] {
            _ = await waitWhile { transmitter.withState { $0.pushes.count } < count }
            return transmitter.withState { $0.pushes }
        }

        func requests() -> [String] { transmitter.withState { $0.requests }.filter { $0.contains("/ssf/") } }

        func stop() async throws {
            try await harness.stop()
            harness.issuer.stop()
            transmitter.stop()
            try? FileManager.default.removeItem(atPath: secretFile)
        }
    }

    static let email: JSONValue = ["format": "email", "email": "ada@example.com"]

    @Test("openid-ssf-receiver-happypath: create, read, update (PATCH), replace (PUT), delete one stream")
    func happyPath() async throws {
        let f = try await Fixture()
        let created = try await f.create()
        #expect(created["iss"]?.stringValue == f.transmitter.issuer && created["events_delivered"]?.arrayValue?.isEmpty == false)
        #expect(try await f.client.read(streamID: f.streamID)["stream_id"]?.stringValue == f.streamID)
        let updated = try await f.client.update(streamID: f.streamID, ["description": "changed"])
        #expect(updated["description"] == "changed")
        let replaced = try await f.client.replace(
            streamID: f.streamID,
            ["delivery": created["delivery"]!, "events_requested": .array([.string(EventType.sessionRevoked.uri)])])
        #expect(replaced["events_delivered"] == .array([.string(EventType.sessionRevoked.uri)]) && replaced["description"] == nil)
        try await f.client.delete(streamID: f.streamID)
        #expect(f.requests() == ["POST /ssf/stream", "GET /ssf/stream", "PATCH /ssf/stream", "PUT /ssf/stream", "DELETE /ssf/stream"])
        #expect(f.transmitter.withState { $0.clientAuthentications } == ["risc-client client_secret_basic"], "one token for every call")
        try await f.stop()
    }

    @Test("client authentication at the token endpoint: client_secret_post and private_key_jwt (a signed assertion for the token endpoint); a wrong secret is refused")
    func clientAuthentication() async throws {
        let key = try PrivateKey.generate(.ec(curve: "P-256"))
        let transmitter = try SSFTestTransmitter(
            audience: Self.audience, clients: [.init(id: "post-client", secret: "post-secret"), .init(id: "jwt-client", publicKey: key.publicKey)])
        defer { transmitter.stop() }
        func client(_ credentials: SSFClientCredentials) -> SSFStreamClient {
            SSFStreamClient(issuer: transmitter.issuer, metadataURL: transmitter.metadataURL, authorization: .clientCredentials(credentials), http: .patient())
        }
        let delivery: JSONObject = ["delivery": ["method": .string(SSFDelivery.poll)]]
        _ = try await client(.init(tokenURL: transmitter.tokenURL, clientID: "post-client", method: .clientSecretPost, secret: "post-secret")).create(delivery)
        _ = try await client(.init(tokenURL: transmitter.tokenURL, clientID: "jwt-client", method: .privateKeyJWT, signer: JWSSigner(key: key, algorithm: .es256, keyID: "c1")))
            .create(delivery)
        #expect(transmitter.withState { $0.clientAuthentications } == ["post-client client_secret_post", "jwt-client private_key_jwt"])
        await #expect(throws: SSFError.self) {
            _ = try await client(.init(tokenURL: transmitter.tokenURL, clientID: "post-client", method: .clientSecretBasic, secret: "wrong")).create(delivery)
        }
    }

    @Test("openid-ssf-receiver-stream-create-delete")
    func createDelete() async throws {
        let f = try await Fixture()
        try await f.create()
        try await f.client.delete(streamID: f.streamID)
        #expect(f.transmitter.withState { $0.streams.isEmpty })
        try await f.stop()
    }

    @Test("openid-ssf-receiver-stream-status-update")
    func statusUpdate() async throws {
        let f = try await Fixture()
        try await f.create()
        #expect(try await f.client.status(streamID: f.streamID)["status"] == "enabled")
        #expect(try await f.client.setStatus(streamID: f.streamID, "paused", reason: "maintenance")["status"] == "paused")
        #expect(f.transmitter.withState { $0.statuses[f.streamID] } == "paused")
        try await f.client.delete(streamID: f.streamID)
        try await f.stop()
    }

    @Test("openid-ssf-receiver-stream-verification: a verification risc asked for is acknowledged, and matched")
    func streamVerification() async throws {
        let f = try await Fixture()
        try await f.create()
        try await f.harness.receiver.storage.store.verifications().request(state: "state-1", apiBase: f.transmitter.issuer, now: Date().timeIntervalSince1970)
        try await f.client.requestVerification(streamID: f.streamID, state: "state-1")
        #expect(await f.pushes(1) == [202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-unsolicited-stream-verification: a verification without state right after create is acknowledged")
    func unsolicitedVerification() async throws {
        let f = try await Fixture()
        try await f.create()
        try f.transmitter.emit(.ssfVerification, subject: ["format": "opaque", "id": .string(f.streamID)], stream: f.streamID)
        #expect(await f.pushes(1) == [202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-stream-supported-events: one example SET of every delivered type, each acknowledged")
    func supportedEvents() async throws {
        let f = try await Fixture()
        try await f.create()
        for type in EventType.ssfSupported {
            let subject: JSONValue = type == .ssfVerification || type == .streamUpdated ? ["format": "opaque", "id": .string(f.streamID)] : Self.email
            var extra: JSONObject = ["event_timestamp": .number(Date().timeIntervalSince1970.rounded(.down))]
            if type == .streamUpdated { extra["status"] = "enabled" }
            if type == .credentialCompromise || type == .credentialChange { extra["credential_type"] = "password" }
            try f.transmitter.emit(type, subject: subject, extra: extra, stream: f.streamID)
        }
        #expect(await f.pushes(EventType.ssfSupported.count) == Array(repeating: 202, count: EventType.ssfSupported.count))
        try await f.stop()
    }

    @Test("openid-ssf-receiver-invalid-set-rejection: corrupted signature, wrong iss, wrong aud, unknown key: exactly 400, JSON, Content-Language, registered err")
    func invalidSETRejection() async throws {
        let f = try await Fixture()
        try await f.create()
        func post(_ set: String) async throws -> (Int, String?, HTTPResponse) {
            let response = try await f.harness.post(set, path: "/events/ssf", headers: [("Authorization", Self.pushAuthorization)])
            return (response.status, (try? JSONParser.parseObject(response.body))?["err"]?.stringValue, response)
        }
        func claims() -> JSONObject {
            var claims = f.transmitter.factory.claims(type: .sessionRevoked, subject: nil)
            claims["sub_id"] = Self.email
            return claims
        }
        let good = try f.transmitter.factory.sign(claims(), header: ["typ": "secevent+jwt"])
        var parts = good.split(separator: ".").map(String.init)
        var signature = Array(Base64URL.decode(parts[2])!)
        signature[5] ^= 0x40
        parts[2] = Base64URL.encode(signature)
        var wrongIssuer = claims()
        wrongIssuer["iss"] = "https://not-the-transmitter.example"
        var wrongAudience = claims()
        wrongAudience["aud"] = "https://another-receiver.example"
        let stranger = JWSSigner(key: try PrivateKey.generate(.ec(curve: "P-256")), algorithm: .es256, keyID: "unknown-key")
        let cases: [(String, Set<String>)] = [
            (parts.joined(separator: "."), ["invalid_key", "authentication_failed"]),
            (try f.transmitter.factory.sign(wrongIssuer, header: ["typ": "secevent+jwt"]), ["invalid_issuer"]),
            (try f.transmitter.factory.sign(wrongAudience, header: ["typ": "secevent+jwt"]), ["invalid_audience"]),
            (try stranger.sign(claims: claims(), header: ["typ": "secevent+jwt"]), ["invalid_key"]),
        ]
        for (set, expected) in cases {
            let (status, err, response) = try await post(set)
            #expect(status == 400 && expected.contains(err ?? ""), "\(status) \(err ?? "no err")")
            #expect(response.header("content-type") == "application/json" && response.header("content-language") != nil)
            #expect((try? JSONParser.parseObject(response.body))?["description"]?.stringValue != nil)
        }
        try await f.stop()
    }

    @Test("openid-ssf-receiver-verification-wrong-state: refused invalid_state")
    func verificationWrongState() async throws {
        let f = try await Fixture()
        try await f.create()
        try await f.client.requestVerification(streamID: f.streamID, state: "risc-never-asked-this")
        #expect(await f.pushes(1) == [400])
        #expect(f.harness.eventLogLines.contains { $0["err"] == "invalid_state" })
        try await f.stop()
    }

    @Test("openid-ssf-receiver-verification-wrong-subject: the right state, but sub_id naming another stream than the one risc made: refused")
    func verificationWrongSubject() async throws {
        let f = try await Fixture()
        try await f.create()
        // What `risc stream create --transmitter` records.
        let record = f.harness.dataDirectory + "/streams/ssf-test.json"
        try FileManager.default.createDirectory(atPath: f.harness.dataDirectory + "/streams", withIntermediateDirectories: true)
        try JSONValue.object(["stream_id": .string(f.streamID)]).serialized.write(toFile: record, atomically: true, encoding: .utf8)
        try await f.harness.receiver.storage.store.verifications().request(state: "right-state", apiBase: f.transmitter.issuer, now: Date().timeIntervalSince1970)
        try f.transmitter.emit(.ssfVerification, subject: ["format": "opaque", "id": "another-stream"], extra: ["state": "right-state"], stream: f.streamID)
        #expect(await f.pushes(1) == [400])
        try await f.client.requestVerification(streamID: f.streamID, state: "right-state")
        #expect(await f.pushes(2) == [400, 202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-stream-issuer-mismatch: a stream answer naming another iss stops the client using it")
    func issuerMismatch() async throws {
        let f = try await Fixture()
        f.transmitter.withState { $0.answerIssuer = "https://impostor.example" }
        await #expect(throws: SSFError.self) { try await f.create() }
        do {
            _ = try await f.create()
        } catch let error as SSFError {
            #expect(error.issuerMismatch)
        }
        try await f.stop()
    }

    @Test("openid-ssf-receiver-verification-behind-queued-events: three events then a verification, all four acknowledged")
    func verificationBehindQueuedEvents() async throws {
        let f = try await Fixture()
        try await f.create()
        try await f.harness.receiver.storage.store.verifications().request(state: "behind", apiBase: f.transmitter.issuer, now: Date().timeIntervalSince1970)
        for _ in 0..<3 { try f.transmitter.emit(.sessionRevoked, subject: Self.email, stream: f.streamID) }
        try await f.client.requestVerification(streamID: f.streamID, state: "behind")
        #expect(await f.pushes(4) == [202, 202, 202, 202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-redelivered-set: the same SET again is 202 again")
    func redeliveredSET() async throws {
        let f = try await Fixture()
        try await f.create()
        try f.transmitter.emit(.sessionRevoked, subject: Self.email, stream: f.streamID, jti: "same-jti")
        _ = await f.pushes(1)
        try f.transmitter.emit(.sessionRevoked, subject: Self.email, stream: f.streamID, jti: "same-jti")
        #expect(await f.pushes(2) == [202, 202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-access-token-expiry: a token is renewed before it expires, or after a 401 invalid_token, and never presented again")
    func accessTokenExpiry() async throws {
        let clock = TestClock(1_800_000_000)
        let f = try await Fixture(clock: clock)
        f.transmitter.withState { $0.tokenLifetime = 20 }
        try await f.create()
        // Past its lifetime less the margin, the client asks for a new token instead of presenting the old one.
        clock.advance(15)
        _ = try await f.client.status(streamID: f.streamID)
        #expect(f.transmitter.withState { $0.clientAuthentications.count } == 2)
        #expect(f.transmitter.withState { $0.staleTokens }.isEmpty)
        // Revoked early: one 401, a new token, the call goes through; the dead token is not presented again.
        f.transmitter.expireTokens()
        _ = try await f.client.status(streamID: f.streamID)
        _ = try await f.client.read(streamID: f.streamID)
        #expect(f.transmitter.withState { $0.staleTokens.count } == 1)
        #expect(f.transmitter.withState { $0.clientAuthentications.count } == 3)
        try await f.stop()
    }

    @Test("openid-ssf-receiver-removed-subject-event: an event about a subject just removed is acknowledged")
    func removedSubjectEvent() async throws {
        let f = try await Fixture()
        try await f.create()
        try await f.client.subject(streamID: f.streamID, Self.email.objectValue!, add: true)
        try await f.client.subject(streamID: f.streamID, Self.email.objectValue!, add: false)
        try f.transmitter.emit(.sessionRevoked, subject: Self.email, stream: f.streamID)
        #expect(await f.pushes(1) == [202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-transmitter-initiated-status-change: stream-updated paused, a held event, stream-updated enabled, the event: all acknowledged")
    func transmitterInitiatedStatusChange() async throws {
        let f = try await Fixture()
        try await f.create()
        let stream: JSONValue = ["format": "opaque", "id": .string(f.streamID)]
        try f.transmitter.emit(.streamUpdated, subject: stream, extra: ["status": "paused", "reason": "maintenance"], stream: f.streamID)
        _ = await f.pushes(1)
        try f.transmitter.emit(.streamUpdated, subject: stream, extra: ["status": "enabled"], stream: f.streamID)
        _ = await f.pushes(2)
        try f.transmitter.emit(.sessionRevoked, subject: Self.email, stream: f.streamID)
        #expect(await f.pushes(3) == [202, 202, 202])
        try await f.stop()
    }

    @Test("openid-ssf-receiver-stream-caep-interop: create, read, status, verify, then every CAEP event for an email and an iss_sub subject, every allowed value")
    func caepInterop() async throws {
        let f = try await Fixture(authorization: nil)
        try await f.create()
        _ = try await f.client.read(streamID: f.streamID)
        _ = try await f.client.status(streamID: f.streamID)
        try await f.harness.receiver.storage.store.verifications().request(state: "interop", apiBase: f.transmitter.issuer, now: Date().timeIntervalSince1970)
        try await f.client.requestVerification(streamID: f.streamID, state: "interop")
        var expected = [202]
        let subjects: [JSONValue] = [Self.email, ["format": "iss_sub", "iss": .string(f.transmitter.issuer), "sub": "user-1"]]
        var events: [(EventType, JSONObject)] = [(.sessionRevoked, [:]), (.tokenClaimsChange, ["claims": ["role": "ro-admin"]])]
        for change in ["create", "revoke", "update", "delete"] {
            for credential in ["password", "pin", "x509", "fido2-platform", "fido2-roaming", "fido-u2f", "verifiable-credential", "phone-voice", "phone-sms", "app"] {
                events.append((.credentialChange, ["change_type": .string(change), "credential_type": .string(credential)]))
            }
        }
        for (current, previous) in [("compliant", "not-compliant"), ("not-compliant", "compliant")] {
            events.append((.deviceComplianceChange, ["current_status": .string(current), "previous_status": .string(previous)]))
        }
        for level in ["nist-aal1", "nist-aal2", "nist-aal3"] { events.append((.assuranceLevelChange, ["current_level": .string(level), "change_direction": "increase"])) }
        for level in ["low", "medium", "high"] { events.append((.riskLevelChange, ["current_level": .string(level), "principal": "USER"])) }
        for subject in subjects {
            for (type, extra) in events {
                var extra = extra
                extra["event_timestamp"] = .number(Date().timeIntervalSince1970.rounded(.down))
                try f.transmitter.emit(type, subject: subject, extra: extra, stream: f.streamID)
                expected.append(202)
            }
        }
        #expect(await f.pushes(expected.count) == expected)
        try await f.stop()
    }
}
