import RISCCore
import Testing

/// `synthetic-risc-sets.json`: Google-shaped SETs with their expected outcome and `err` code.
@Suite("Synthetic RISC SET vectors")
struct SyntheticSETVectorTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let token: String
        let expected: String
        let err: String?
        var description: String { name }
    }

    static let document: JSONObject = try! Vectors.load("synthetic-risc-sets")

    static let cases: [Case] = document["cases"]!.arrayValue!.map { value in
        let object = value.objectValue!
        return Case(
            name: object["name"]!.stringValue!, token: object["token"]!.stringValue!,
            expected: object["expected"]!.stringValue!, err: object["err"]?.stringValue)
    }

    static func verifier() throws -> SETVerifier {
        let config = document["receiver_config"]!.objectValue!
        let keys = try JWKSet(json: Array(JSONValue.object(document["jwks"]!.objectValue!).serialized.utf8))
        let policy = SETPolicy(
            audiences: Set(config["audiences"]!.arrayValue!.map { $0.stringValue! }),
            algorithms: Set(config["allowed_algs"]!.arrayValue!.map { JWSAlgorithm(rawValue: $0.stringValue!) }))
        return SETVerifier(policy: policy, keys: StaticKeyProvider(keys: keys, issuer: config["issuer"]!.stringValue!))
    }

    @Test("all sixteen cases are present")
    func count() { #expect(Self.cases.count == 16) }

    @Test("each case gets its expected outcome", arguments: cases)
    func outcome(_ c: Case) async throws {
        let verifier = try Self.verifier()
        if c.expected == "valid" {
            let validated = try await verifier.verify(Array(c.token.utf8), now: 1_800_000_000)
            #expect(!validated.tokenID.isEmpty)
            #expect(!validated.events.isEmpty)
        } else {
            do {
                _ = try await verifier.verify(Array(c.token.utf8), now: 1_800_000_000)
                Issue.record("\(c.name) was accepted; expected \(c.err ?? "?")")
            } catch let error as SETError {
                #expect(error.code.rawValue == c.err)
                #expect(!error.responseBody.contains(c.token.prefix(40)))
            }
        }
    }

    @Test("token-revoked identifiers match the stored refresh token")
    func tokenIdentifiers() async throws {
        let stored = Self.document["stored_refresh_token"]!.stringValue!
        #expect(SHA512.doubleHashBase64(stored) == Self.document["stored_refresh_token_hash_base64_sha512_sha512"]!.stringValue!)
        // The identifier's other reading (spec §9 question 5), the inner digest as lowercase hex:
        // base64.b64encode(sha512(sha512(token).hexdigest().encode()).digest()) in Python.
        let fingerprint = TokenFingerprint(token: stored, key: [1])
        #expect(fingerprint.hash == SHA512.doubleHashBase64(stored))
        #expect(fingerprint.hashOfHex == "QV2nEJ5cqWMY6jzo65iFzdtp4fhEH7oFbPFn7ze6e57h+JXcLqFtexWgRsx3vihidoz2c96Q8hbjRN4e2CLisQ==")
        #expect(String(stored.prefix(16)) == Self.document["stored_refresh_token_prefix"]!.stringValue!)
        let verifier = try Self.verifier()
        for c in Self.cases where c.name.hasPrefix("token-revoked") {
            let validated = try await verifier.verify(Array(c.token.utf8), now: 1_800_000_000)
            let event = try #require(validated.events.first)
            #expect(event.type == .tokenRevoked)
            guard case .oauthToken(let identifier)? = event.subject else {
                Issue.record("no oauth_token subject")
                continue
            }
            switch identifier.algorithm {
            case .prefix: #expect(identifier.token == String(stored.prefix(16)))
            case .hashSHA512SHA512: #expect(identifier.token == SHA512.doubleHashBase64(stored))
            default: Issue.record("unexpected identifier algorithm")
            }
        }
    }

    @Test("the Google doc example parses into an account-disabled event with reason hijacking")
    func docExample() async throws {
        let c = try #require(Self.cases.first { $0.name == "google-doc-example-account-disabled" })
        let validated = try await Self.verifier().verify(Array(c.token.utf8), now: 1_800_000_000)
        #expect(validated.issuer == "https://accounts.google.com/")
        #expect(validated.tokenID == "756E69717565206964656E746966696572")
        #expect(validated.issuedAt == 1_508_184_845)
        let event = try #require(validated.events.first)
        #expect(event.type == .accountDisabled)
        #expect(event.reason == "hijacking")
        #expect(event.subject == .issuerSubject(issuer: "https://accounts.google.com/", subject: "7375626A656374"))
    }
}
