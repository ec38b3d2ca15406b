import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Synchronization
import Testing

@Suite("RISC management API client against a strict fake of Google's")
struct RISCManagementClientTests {
    struct Setup {
        let account: TestServiceAccount
        let api: FakeRISCAPI
        let client: RISCManagementClient
    }

    static func setup(domains: [String] = ["example.com"]) throws -> Setup {
        let account = try TestServiceAccount(directory: Fixture.temporaryDirectory())
        let entry = Fixture.keys.entries.first { $0.algorithm == .rs256 }!
        var configuration = FakeRISCAPI.Configuration(
            clientEmail: account.clientEmail, keyID: account.keyID, publicKey: account.key.publicKey,
            issuer: SETFactory(signer: entry.signer))
        configuration.authorizedDomains = domains
        let api = try FakeRISCAPI(configuration: configuration)
        let client = RISCManagementClient(account: try ServiceAccount(keyFile: account.path), base: api.baseURL + "/")
        return Setup(account: account, api: api, client: client)
    }

    @Test("the bearer token: RS256, kid = private_key_id, iss = sub = client email, Google's aud, exp = iat + 3600")
    func bearerToken() throws {
        let account = try TestServiceAccount(directory: Fixture.temporaryDirectory())
        let service = try ServiceAccount(keyFile: account.path)
        let jws = try CompactJWS(try service.bearerToken(now: 1_800_000_000.7))
        #expect(jws.header.algorithm == .rs256 && jws.header.keyID == account.keyID)
        #expect(account.key.publicKey.verify(signature: jws.signature, message: jws.signingInput, algorithm: .rs256))
        let claims = try JSONParser.parseObject(jws.payload)
        #expect(claims["iss"]?.stringValue == account.clientEmail && claims["sub"]?.stringValue == account.clientEmail)
        #expect(claims["aud"]?.stringValue == "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService")
        #expect(claims["iat"]?.numberValue == 1_800_000_000 && claims["exp"]?.numberValue == 1_800_003_600)
        #expect(!String(describing: service).contains("PRIVATE"))
    }

    @Test("bad key files are named without echoing their contents")
    func badKeyFiles() throws {
        let directory = Fixture.temporaryDirectory()
        func load(_ json: String) -> String {
            let path = directory.appendingPathComponent("\(UUID().uuidString).json").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(json.utf8)))
            do {
                _ = try ServiceAccount(keyFile: path)
                return "loaded"
            } catch { return String(describing: error) }
        }
        #expect(load(#"{"type":"authorized_user","client_email":"a@b"}"#).contains("expected 'service_account'"))
        #expect(load(#"{"type":"service_account","private_key_id":"k","private_key":"x"}"#).contains("no 'client_email'"))
        let notPEM = load(#"{"type":"service_account","client_email":"a@b","private_key_id":"k","private_key":"SECRET-MATERIAL"}"#)
        #expect(notPEM.contains("not a PEM private key") && !notPEM.contains("SECRET-MATERIAL"))
        let ec = try PrivateKey.generate(.ec(curve: "P-256")).pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        #expect(load(#"{"type":"service_account","client_email":"a@b","private_key_id":"k","private_key":"\#(ec)"}"#).contains("not an RSA key"))
        // A weak RSA key signs nothing: Google rejects it, and risc says why before asking.
        let weak = try PrivateKey.generate(.rsa(bits: 1024)).pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        #expect(load(#"{"type":"service_account","client_email":"a@b","private_key_id":"k","private_key":"\#(weak)"}"#).contains("1024 bits is under the 2048-bit minimum"))
        #expect(load("[1]").contains("not a JSON object"))
        // A key file saved again by an editor that writes a byte-order mark (Windows' Notepad) is the same key.
        let account = try TestServiceAccount(directory: directory)
        #expect(load(String(decoding: [0xEF, 0xBB, 0xBF] + Array(try Data(contentsOf: URL(fileURLWithPath: account.path))), as: UTF8.self)) == "loaded")
        #expect(String(describing: (try? ServiceAccount(keyFile: "/nonexistent")) as Any) == "nil")
    }

    @Test("update, show, status, disable, enable, verify: bodies and bearer tokens as Google wants them")
    func lifecycle() async throws {
        let setup = try Self.setup(domains: ["localhost"])
        defer { setup.api.stop() }
        // Before any configuration: Google's 404, with the fix.
        await #expect { try await setup.client.stream() } throws: { error in
            let error = error as! RISCAPIError
            return error.status == 404 && error.advice?.contains("risc stream update") == true && !error.isTemporary
        }
        try await setup.client.updateStream(url: "https://localhost:8443/events", events: [.sessionsRevoked, .verification])
        let stream = try await setup.client.stream()
        #expect(stream["delivery"]?.objectValue?["delivery_method"]?.stringValue == "https://schemas.openid.net/secevent/risc/delivery-method/push")
        #expect(stream["events_requested"]?.arrayValue?.compactMap(\.stringValue) == [EventType.sessionsRevoked.uri, EventType.verification.uri])
        #expect(try await setup.client.status()["status"]?.stringValue == "enabled")
        try await setup.client.setStatus(enabled: false)
        #expect(try await setup.client.status()["status"]?.stringValue == "disabled")
        try await setup.client.setStatus(enabled: true)
        try await setup.client.verify(state: "hello-state")
        #expect(
            setup.api.state.withLock { $0.requests } == [
                "GET /v1beta/stream", "POST /v1beta/stream:update", "GET /v1beta/stream", "GET /v1beta/stream/status",
                "POST /v1beta/stream/status:update", "GET /v1beta/stream/status", "POST /v1beta/stream/status:update",
                "POST /v1beta/stream:verify",
            ])
        #expect(setup.api.state.withLock { $0.refusals }.isEmpty)
    }

    @Test("Google's documented errors become actionable messages")
    func errors() async throws {
        let setup = try Self.setup()
        defer { setup.api.stop() }
        func failure(_ body: () async throws -> Void) async -> RISCAPIError? {
            do {
                try await body()
                return nil
            } catch { return error as? RISCAPIError }
        }
        let http = await failure { try await setup.client.updateStream(url: "http://example.com/events", events: EventType.google) }
        #expect(http?.status == 403 && http?.advice?.contains("https://") == true)
        let domain = await failure { try await setup.client.updateStream(url: "https://elsewhere.org/events", events: EventType.google) }
        #expect(domain?.status == 403 && domain?.advice?.contains("authorized domains") == true)
        let noStatus = await failure { try await setup.client.setStatus(enabled: true) }
        #expect(noStatus?.status == 404)
        for (message, advice) in [
            ("Service account needs permission to access your RISC configuration", "roles/riscconfigs.admin"),
            ("Existing stream configuration does not have spec-compliant delivery method for RISC.", "Firebase"),
            ("To use this API your project must have at least one OAuth client configured.", "OAuth client ID"),
            ("Stream management APIs should only be called by a service account.", "service account's JSON key"),
            ("Project could not be found.", "project"),
        ] {
            setup.api.state.withLock { $0.forcedError = (403, message) }
            let error = await failure { _ = try await setup.client.stream() }
            #expect(error?.message == message)
            #expect(error?.advice?.contains(advice) == true, "\(message)")
        }
        setup.api.state.withLock { $0.forcedError = (503, "backend unavailable") }
        #expect(await failure { _ = try await setup.client.status() }?.isTemporary == true)
        setup.api.state.withLock { $0.forcedError = nil }

        // A token from another key, or from a wrong clock: 401, and the fake says why.
        var stale = setup.client
        stale.clock = { Date().timeIntervalSince1970 - 7_200 }
        let expired = await failure { _ = try await stale.stream() }
        #expect(expired?.status == 401 && expired?.advice?.contains("clock") == true)
        let other = try TestServiceAccount(
            directory: Fixture.temporaryDirectory(), clientEmail: setup.account.clientEmail, key: try PrivateKey.generate(.rsa(bits: 2048)))
        let impostor = RISCManagementClient(account: try ServiceAccount(keyFile: other.path), base: setup.api.baseURL)
        #expect(await failure { _ = try await impostor.stream() }?.status == 401)
        #expect(setup.api.state.withLock { $0.refusals } == ["iat is not now", "kid is not the key's private_key_id"])

        // Nobody listening: temporary, with the network advice.
        let port = try LoopbackHTTPServer { _ in .init() }
        let closed = port.baseURL
        port.stop()
        let nowhere = RISCManagementClient(account: try ServiceAccount(keyFile: setup.account.path), base: closed)
        let unreachable = await failure { _ = try await nowhere.stream() }
        #expect(unreachable?.status == nil && unreachable?.isTemporary == true && unreachable?.advice?.contains("network") == true)
    }
}
