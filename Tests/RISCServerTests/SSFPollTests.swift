import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

/// The same modules with poll delivery (RFC 8936): risc's poller against the test transmitter.
@Suite("SSF receiver conformance (poll)", .serialized)
struct SSFPollTests {
    /// A poll stream made with the client, and a receiver whose poller polls it (every 0.1 s when
    /// idle); `edit` changes the receiver's configuration further (a shared store).
    static func start(_ transmitter: SSFTestTransmitter, edit: @escaping (inout ReceiverConfiguration) -> Void = { _ in }) async throws -> (ServerHarness, String) {
        let (url, streamID) = try await stream(transmitter)
        return (try await receiver(transmitter, pollURL: url, edit: edit), streamID)
    }

    /// A new poll stream: its poll endpoint and id.
    static func stream(_ transmitter: SSFTestTransmitter) async throws -> (String, String) {
        let client = SSFStreamClient(
            issuer: transmitter.issuer, metadataURL: transmitter.metadataURL,
            authorization: .clientCredentials(.init(tokenURL: transmitter.tokenURL, clientID: "poller", method: .clientSecretBasic, secret: "poll-secret")),
            http: .patient())
        let stream = try await client.create(["delivery": ["method": .string(SSFDelivery.poll)], "events_requested": .array(EventType.ssfSupported.map { .string($0.uri) })])
        return (try #require(stream["delivery"]?.objectValue?["endpoint_url"]?.stringValue), try #require(stream["stream_id"]?.stringValue))
    }

    /// A started receiver polling `pollURL`.
    static func receiver(_ transmitter: SSFTestTransmitter, pollURL: String, edit: @escaping (inout ReceiverConfiguration) -> Void = { _ in }) async throws -> ServerHarness {
        let secret = Scratch.root.appendingPathComponent("ssf-poll-\(UUID().uuidString)").path
        try "poll-secret".write(toFile: secret, atomically: true, encoding: .utf8)
        let harness = try ServerHarness {
            var settings = TransmitterSettings(name: "polled")
            settings.issuer = transmitter.issuer
            settings.audiences = [transmitter.audience]
            settings.algorithms = ["ES256"]
            settings.delivery = "poll"
            settings.pollURL = pollURL
            settings.pollInterval = 0.1
            settings.tokenEndpoint = transmitter.tokenURL
            settings.clientID = "poller"
            settings.clientSecretFile = secret
            $0.transmitters = [settings]
            edit(&$0)
        }
        try await harness.start()
        return harness
    }

    @Test("poll with two receivers on one PostgreSQL: exactly one polls the stream (the lease); when it stops, the other takes over")
    func onePollerAcrossReceivers() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/poll", clients: [.init(id: "poller", secret: "poll-secret")])
            defer { transmitter.stop() }
            let keyFile = cluster.directory + "/token-key"
            try PrivateFiles.writeAtomically(keyFile, [UInt8](repeating: 7, count: 32))
            let storeURL = try StoreURL(cluster.url)
            let (url, streamID) = try await Self.stream(transmitter)
            let shared: (inout ReceiverConfiguration) -> Void = {
                $0.store.url = storeURL
                $0.tokenKeyFile = keyFile
            }
            let first = try await Self.receiver(transmitter, pollURL: url, edit: shared)
            let second = try await Self.receiver(transmitter, pollURL: url, edit: shared)
            let email: JSONValue = ["format": "email", "email": "ada@example.com"]
            func received(_ harness: ServerHarness) -> Int { harness.eventLogLines.filter { $0["step"] == "received" && $0["transmitter"] == "polled" }.count }
            for _ in 0..<5 { try transmitter.emit(.sessionRevoked, subject: email, stream: streamID) }
            _ = await waitWhile { transmitter.withState { $0.acknowledged.count } < 5 }
            #expect(transmitter.withState { $0.acknowledged.count } == 5)
            let counts = [received(first), received(second)]
            #expect(counts.sorted() == [0, 5], "one receiver took every SET: \(counts)")
            // The one that polled stops (giving the lease up); the other polls from then on.
            let (holder, other) = counts[0] == 5 ? (first, second) : (second, first)
            try await holder.stop()
            for _ in 0..<3 { try transmitter.emit(.sessionRevoked, subject: email, stream: streamID) }
            _ = await waitWhile { transmitter.withState { $0.acknowledged.count } < 8 }
            #expect(received(other) == 3)
            try await other.stop()
            first.issuer.stop()
            second.issuer.stop()
        }
    }

    @Test(
        "openid-ssf-receiver (poll): SETs acknowledged once stored, in the next poll; refused ones reported in setErrs with their code (invalid-set-rejection, verification-wrong-state); a redelivered SET acknowledged again"
    )
    func pollDelivery() async throws {
        let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/poll", clients: [.init(id: "poller", secret: "poll-secret")])
        defer { transmitter.stop() }
        let (harness, streamID) = try await Self.start(transmitter)
        let email: JSONValue = ["format": "email", "email": "ada@example.com"]
        var jtis: [String] = []
        for _ in 0..<3 { jtis.append(try transmitter.emit(.sessionRevoked, subject: email, stream: streamID)) }
        let wrongState = try transmitter.emit(.ssfVerification, subject: ["format": "opaque", "id": .string(streamID)], extra: ["state": "not-asked"], stream: streamID)
        var claims = transmitter.factory.claims(type: .sessionRevoked, subject: nil, jti: "tampered")
        claims["sub_id"] = email
        var parts = try transmitter.factory.sign(claims, header: ["typ": "secevent+jwt"]).split(separator: ".").map(String.init)
        var signature = Array(Base64URL.decode(parts[2])!)
        signature[3] ^= 1
        parts[2] = Base64URL.encode(signature)
        transmitter.deliver(jti: "tampered", set: parts.joined(separator: "."), stream: streamID)
        _ = await waitWhile { transmitter.withState { $0.acknowledged.count < 3 || $0.setErrors.count < 2 } }
        let state = transmitter.withState { $0 }
        #expect(Set(state.acknowledged) == Set(jtis), "\(state.acknowledged)")
        #expect(state.setErrors[wrongState]?["err"] == "invalid_state")
        #expect(["invalid_key", "authentication_failed"].contains(state.setErrors["tampered"]?["err"]?.stringValue ?? ""))
        #expect(state.pending[streamID]?.isEmpty ?? true)
        // Stored before acknowledged: each acknowledged SET is in the receiver's log as accepted.
        for jti in jtis { #expect(harness.eventLogLines.contains { $0["jti"]?.stringValue == jti && $0["outcome"] == "accepted" && $0["transmitter"] == "polled" }) }
        // The same SET again: acknowledged again (a duplicate to the store).
        try transmitter.emit(.sessionRevoked, subject: email, stream: streamID, jti: jtis[0])
        _ = await waitWhile { transmitter.withState { $0.acknowledged.count < 4 } }
        #expect(transmitter.withState { $0.acknowledged.filter { $0 == jtis[0] }.count } == 2)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("poll: a member of the answer's `sets` that is no string is refused in setErrs and logged, not left to come back in every poll unnoticed")
    func pollMemberThatIsNoString() async throws {
        let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/poll", clients: [.init(id: "poller", secret: "poll-secret")])
        defer { transmitter.stop() }
        let (harness, streamID) = try await Self.start(transmitter)
        transmitter.withState { $0.oddPollMembers = ["odd-number": 42, "odd-object": ["jwt": "a.b.c"]] }
        let jti = try transmitter.emit(.sessionRevoked, subject: ["format": "email", "email": "ada@example.com"], stream: streamID)
        _ = await waitWhile { transmitter.withState { $0.acknowledged.isEmpty || $0.setErrors.count < 2 } }
        let state = transmitter.withState { $0 }
        #expect(state.acknowledged == [jti])
        for odd in ["odd-number", "odd-object"] {
            #expect(state.setErrors[odd]?["err"] == "invalid_request", "\(odd): \(state.setErrors)")
            #expect(harness.eventLogLines.contains { $0["outcome"] == "rejected" && $0["remote"] == .string("poll:polled") && $0["jti"] == .string(odd) })
        }
        #expect(state.oddPollMembers.isEmpty)
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: a transmitter answering `moreAvailable: true` with no SETs (a bug of its) had the
    /// poller ask again at once, for ever: a busy loop against the transmitter. An answer that
    /// brings nothing waits `poll_interval`, whatever it says of more.
    @Test(
        "poll: an answer with no SETs, or with only the ones that very poll acknowledged, waits the poll interval even when it says more are available",
        arguments: [false, true])
    func moreAvailableButNothingNew(_ ignoringAcknowledgements: Bool) async throws {
        let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/poll", clients: [.init(id: "poller", secret: "poll-secret")])
        defer { transmitter.stop() }
        let poller = try await RecordedPoller(transmitter, name: "eager")
        transmitter.withState {
            $0.alwaysMoreAvailable = true
            $0.ignoresAcknowledgements = ignoringAcknowledgements
        }
        if ignoringAcknowledgements { try transmitter.emit(.sessionRevoked, subject: ["format": "email", "email": "a@example.com"], stream: poller.streamID) }
        let task = Task { await poller.poller.run() }
        _ = await waitWhile(upTo: 5) { transmitter.withState { $0.requests.filter { $0 == "POST /ssf/poll" }.count } < 4 }
        task.cancel()
        await task.value
        let polls = transmitter.withState { $0.requests.filter { $0 == "POST /ssf/poll" }.count }
        let waits = poller.waits
        #expect(waits.filter { $0 == 7 }.count >= polls - 3, "\(polls) polls, waits \(waits)")
    }

    /// A poller of a new poll stream of `transmitter` (every 7 s when a poll brings nothing), into
    /// a store in memory; its sleeps are recorded and cut short.
    final class RecordedPoller: Sendable {
        let poller: SSFPoller
        let streamID: String
        let store = MemoryEventStore()
        /// The sleeps asked for, in seconds.
        var waits: [Double] { slept.list.withLock { $0 } }
        private let slept = Slept()

        final class Slept: Sendable { let list = Mutex<[Double]>([]) }

        init(_ transmitter: SSFTestTransmitter, name: String) async throws {
            let client = SSFStreamClient(
                issuer: transmitter.issuer, metadataURL: transmitter.metadataURL,
                authorization: .clientCredentials(.init(tokenURL: transmitter.tokenURL, clientID: "poller", method: .clientSecretBasic, secret: "poll-secret")),
                http: .patient())
            let stream = try await client.create(["delivery": ["method": .string(SSFDelivery.poll)]])
            streamID = try #require(stream["stream_id"]?.stringValue)
            let url = try #require(stream["delivery"]?.objectValue?["endpoint_url"]?.stringValue)
            let keys = try JWKSet(json: Array(transmitter.jwks.utf8))
            var policy = SETPolicy(audiences: [transmitter.audience], algorithms: [.es256])
            policy.requiresType = true
            let intake = Intake(
                verifier: SETVerifier(policy: policy, keys: StaticKeyProvider(keys: keys, issuer: transmitter.issuer)), store: store, log: MemoryEventLog()
            ) { 1_800_000_000 }
            var settings = SSFPoller.Settings(name: name, url: url, path: nil, owner: "test")
            settings.interval = 7
            let slept = self.slept
            poller = SSFPoller(
                settings: settings, client: client, intake: intake, leases: LocalLeases(),
                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, clock: { 1_800_000_000 },
                sleep: { seconds in
                    slept.list.withLock { $0.append(seconds) }
                    try await Task.sleep(for: .milliseconds(5))
                })
        }
    }

    @Test("poll: 429 with Retry-After is waited out as asked, then polling goes on")
    func throttled() async throws {
        let transmitter = try SSFTestTransmitter(audience: "https://risc.example.com/poll", clients: [.init(id: "poller", secret: "poll-secret")])
        defer { transmitter.stop() }
        let recorded = try await RecordedPoller(transmitter, name: "throttled")
        transmitter.withState { $0.throttlePolls = 2 }
        let jti = try transmitter.emit(.sessionRevoked, subject: ["format": "email", "email": "a@example.com"], stream: recorded.streamID)
        let task = Task { await recorded.poller.run() }
        _ = await waitWhile { !transmitter.withState { $0.acknowledged.contains(jti) } }
        task.cancel()
        await task.value
        #expect(Array(recorded.waits.prefix(2)) == [1, 1], "Retry-After: 1, twice")
        #expect(recorded.store.records.map(\.tokenID) == [jti])
        #expect(transmitter.withState { $0.acknowledged } == [jti])
    }
}
