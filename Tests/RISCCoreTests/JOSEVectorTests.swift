import RISCCore
import Testing

/// The public JOSE vectors (RFC 7515, RFC 7520, RFC 8037): each verifies with its algorithm
/// enabled, fails when that algorithm is not allowed, fails with one signature bit flipped.
@Suite("JOSE vectors")
struct JOSEVectorTests {
    struct Case: Sendable, CustomStringConvertible {
        let file: String
        let algorithm: JWSAlgorithm
        let jwkPath: [String]
        let compactPath: [String]
        var description: String { file }
    }

    static let cases: [Case] = [
        Case(file: "rfc7515-A2-rs256", algorithm: .rs256, jwkPath: ["jwk_public"], compactPath: ["jws_compact"]),
        Case(file: "rfc7515-A3-es256", algorithm: .es256, jwkPath: ["jwk_public"], compactPath: ["jws_compact"]),
        Case(file: "rfc7520-cookbook-4_1.rsa_v15_signature", algorithm: .rs256, jwkPath: ["input", "key"], compactPath: ["output", "compact"]),
        Case(file: "rfc7520-cookbook-4_2.rsa-pss_signature", algorithm: .ps384, jwkPath: ["input", "key"], compactPath: ["output", "compact"]),
        Case(file: "rfc7520-cookbook-4_3.ecdsa_signature", algorithm: .es512, jwkPath: ["input", "key"], compactPath: ["output", "compact"]),
        Case(file: "rfc8037-A4-ed25519-cookbook-curve25519-jws", algorithm: .eddsa, jwkPath: ["input", "key"], compactPath: ["output", "compact"]),
    ]

    static func load(_ c: Case) throws -> (JWK, CompactJWS, String) {
        let document = try Vectors.load(c.file)
        var jwkValue: JSONValue = .object(document)
        for key in c.jwkPath { jwkValue = jwkValue.objectValue![key]! }
        var compact: JSONValue = .object(document)
        for key in c.compactPath { compact = compact.objectValue![key]! }
        let token = compact.stringValue!
        return (try JWK(json: jwkValue.objectValue!), try CompactJWS(token), token)
    }

    @Test("verifies with its algorithm enabled", arguments: cases)
    func verifies(_ c: Case) throws {
        let (jwk, jws, _) = try Self.load(c)
        #expect(jws.header.algorithm == c.algorithm)
        let verified = try SignatureVerifier.verify(jws, with: jwk, allowed: [c.algorithm])
        let document = try Vectors.load(c.file)
        if let expected = document.string("expected_payload_utf8") ?? document.string("input", "payload") {
            #expect(verified.payload == Array(expected.utf8))
        }
    }

    @Test("is refused when its algorithm is not allowed", arguments: cases)
    func refusedWhenNotAllowed(_ c: Case) throws {
        let (jwk, jws, _) = try Self.load(c)
        let others = Set(JWSAlgorithm.supported).subtracting([c.algorithm])
        let error = #expect(throws: SETError.self) { try SignatureVerifier.verify(jws, with: jwk, allowed: others) }
        #expect(error?.code == .invalidRequest)
    }

    @Test("fails with one signature bit flipped", arguments: cases)
    func flippedBit(_ c: Case) throws {
        let (jwk, jws, token) = try Self.load(c)
        var signature = jws.signature
        signature[signature.count / 2] ^= 0x01
        let parts = token.split(separator: ".")
        let tampered = try CompactJWS("\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))")
        let error = #expect(throws: SETError.self) { try SignatureVerifier.verify(tampered, with: jwk, allowed: [c.algorithm]) }
        #expect(error?.code == .authenticationFailed)
    }

    @Test("the HMAC vector is refused whatever is allowed, and its key is not usable")
    func hmacRefused() throws {
        let document = try Vectors.load("rfc7520-cookbook-4_4.hmac-sha2_integrity_protection")
        let jws = try CompactJWS(document.string("output", "compact")!)
        #expect(jws.header.algorithm.rawValue == "HS256")
        let error = #expect(throws: SETError.self) {
            try SignatureVerifier.checkAlgorithm(jws.header.algorithm, allowed: Set(JWSAlgorithm.supported + [jws.header.algorithm]))
        }
        #expect(error?.code == .invalidRequest)
        #expect(throws: JWKError.self) { try JWK(json: document.object("input", "key")!) }
        #expect(!SETPolicy(audiences: ["a"], algorithms: [JWSAlgorithm(rawValue: "HS256")]).problems.isEmpty)
        #expect(!SETPolicy(audiences: ["a"], algorithms: [JWSAlgorithm(rawValue: "none")]).problems.isEmpty)
    }

    @Test("RFC 8935 and RFC 8417 example SETs are refused by an RS256 receiver", arguments: ["rfc8935_figure1", "rfc8417_figure6_unsecured"])
    func rfcExamplesRefused(_ name: String) throws {
        let document = try Vectors.load("rfc-set-examples")
        let token = document.string(name, "token")!
        let keys = StaticKeyProvider(keys: JWKSet(keys: []), issuer: "https://idp.example.com/")
        let error = #expect(throws: SETError.self) {
            let jws = try SETVerifier.parse(Array(token.utf8), policy: SETPolicy(audiences: ["x"]))
            _ = try keys.key(for: jws.header.keyID ?? "")
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("the RFC 8935 Figure 1 header, with its trailing newline, still parses")
    func figureOneHeaderParses() throws {
        let document = try Vectors.load("rfc-set-examples")
        let header = String(document.string("rfc8935_figure1", "token")!.split(separator: ".")[0])
        let decoded = try #require(Base64URL.decode(header))
        #expect(decoded.last == 0x0A)
        #expect(try JSONParser.parseObject(decoded)["typ"] == "secevent+jwt")
    }

    @Test(
        "signing with the published private keys reproduces the deterministic signatures",
        arguments: [
            ("rfc7515-A2-rs256", ["jwk_private"], ["jws_compact"]),
            ("rfc7520-cookbook-4_1.rsa_v15_signature", ["input", "key"], ["output", "compact"]),
            ("rfc8037-A4-ed25519-cookbook-curve25519-jws", ["input", "key"], ["output", "compact"]),
        ])
    func deterministicSignatures(file: String, keyPath: [String], compactPath: [String]) throws {
        let document = try Vectors.load(file)
        var keyValue: JSONValue = .object(document)
        for key in keyPath { keyValue = keyValue.objectValue![key]! }
        var compact: JSONValue = .object(document)
        for key in compactPath { compact = compact.objectValue![key]! }
        let token = compact.stringValue!
        let parts = token.split(separator: ".")
        let key = try PrivateKey(jwk: keyValue.objectValue!)
        let jws = try CompactJWS(token)
        let signature = try key.sign(Array("\(parts[0]).\(parts[1])".utf8), algorithm: jws.header.algorithm)
        #expect(Base64URL.encode(signature) == String(parts[2]))
    }

    @Test(
        "ECDSA and PSS signatures made here verify (randomised, so round-trip only)",
        arguments: [
            ("rfc7515-A3-es256", ["jwk_private"], JWSAlgorithm.es256),
            ("rfc7520-cookbook-4_3.ecdsa_signature", ["input", "key"], JWSAlgorithm.es512),
            ("rfc7520-cookbook-4_2.rsa-pss_signature", ["input", "key"], JWSAlgorithm.ps384),
        ])
    func randomisedRoundTrip(file: String, keyPath: [String], algorithm: JWSAlgorithm) throws {
        let document = try Vectors.load(file)
        var keyValue: JSONValue = .object(document)
        for key in keyPath { keyValue = keyValue.objectValue![key]! }
        let key = try PrivateKey(jwk: keyValue.objectValue!)
        let token = try JWSSigner(key: key, algorithm: algorithm, keyID: nil).sign(payload: Array("payload".utf8))
        let jwk = try JWK(json: keyValue.objectValue!)
        _ = try SignatureVerifier.verify(try CompactJWS(token), with: jwk, allowed: [algorithm])
    }
}
