import Foundation
import RISCCore
import RISCTestKit
import Testing

/// What an attacker found at the JOSE and claims layers (issue 13): absurd NumericDates, control
/// characters echoed back, weak RSA keys and ambiguous `kid`s in a served key set.
@Suite("Hardening: tokens and keys")
struct CoreHardeningTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let rsa = keys.entry(for: .rs256)!

    static func verifier(_ set: JWKSet, algorithms: Set<JWSAlgorithm> = JWSAlgorithm.defaultAllowed) -> SETVerifier {
        SETVerifier(
            policy: SETPolicy(audiences: [SETFactory.defaultAudience], algorithms: algorithms),
            keys: StaticKeyProvider(keys: set, issuer: SETFactory.defaultIssuer))
    }

    // MARK: NumericDates

    @Test(
        "a correctly signed SET with an absurd iat or toe is refused as malformed, never trapped on",
        arguments: [
            1e19, 9.3e18, -1, 1.7e12, 1e300, 253_402_300_800,
        ])
    func absurdIssuedAt(_ value: Double) async throws {
        let factory = SETFactory(signer: Self.rsa.signer)
        let verifier = Self.verifier(try Self.keys.jwks)
        for claim in ["iat", "toe"] {
            var claims = factory.claims(type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "j-\(claim)")
            claims[claim] = .number(value)
            let token = try factory.sign(claims)
            let error = await #expect(throws: SETError.self) { try await verifier.verify(Array(token.utf8), now: 1_800_000_000) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.description.contains(claim) == true)
        }
    }

    @Test("an iat far ahead (but plausible) is accepted with a warning that does not trap")
    func futureIssuedAt() async throws {
        let factory = SETFactory(signer: Self.rsa.signer)
        var claims = factory.claims(type: .sessionsRevoked, subject: factory.accountSubject("1"), jti: "j")
        claims["iat"] = .number(253_402_300_799)
        let validated = try await Self.verifier(try Self.keys.jwks).verify(Array(try factory.sign(claims).utf8), now: 0)
        #expect(validated.warnings.first?.contains("in the future") == true)
        #expect(Timestamp.iso8601(1e19).hasPrefix("9999-12-31T23:59:59"))
        #expect(Timestamp.iso8601(-.infinity).hasPrefix("0001-01-01T00:00:00"))
        #expect(Timestamp.iso8601(.nan).hasPrefix("1970-01-01"))
    }

    // MARK: Echoed text

    @Test("descriptions never carry control characters or unbounded echoes")
    func sanitizedDescriptions() async throws {
        let hostile = "\u{1B}[2J\u{1B}[1;1HRS256\u{7}\u{202E}" + String(repeating: "é", count: 500)
        let header = Base64URL.encode(Array(JSONValue.object(["alg": .string(hostile), "kid": "k"]).serialized.utf8))
        let token = "\(header).\(Base64URL.encode(Array("{}".utf8))).AAAA"
        let error = await #expect(throws: SETError.self) { try await Self.verifier(try Self.keys.jwks).verify(Array(token.utf8), now: 0) }
        let description = try #require(error?.description)
        #expect(Printable.isSafe(description))
        #expect(description.contains("\\x1b[2J"))
        #expect(description.utf8.count <= SETError.maxDescriptionBytes)
        #expect(error?.responseBody.utf8.contains(0x1B) == false)
        // The sanitizer itself: escapes, bidi controls, byte cap on a character boundary.
        #expect(Printable.safe("a\u{1B}b\u{9B}c\u{202E}d\u{2028}") == "a\\x1bb\\x9bc\\u{202e}d\\u{2028}")
        let capped = Printable.safe(String(repeating: "€", count: 100), maxBytes: 20)
        #expect(capped.utf8.count <= 20 && capped.hasSuffix("…") && capped.hasPrefix("€€€€€"))
        #expect(Printable.safe("plain text") == "plain text")
    }

    // MARK: RSA keys

    static func rsaJWK(n: [UInt8], e: [UInt8], kid: String = "weak", alg: String = "RS512") -> JSONObject {
        ["kty": "RSA", "kid": .string(kid), "alg": .string(alg), "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e))]
    }

    static var testModulus: [UInt8] {
        let jwk = Self.rsa.key.publicKey.jwk(keyID: nil, algorithm: nil)
        return Base64URL.decode(jwk["n"]!.stringValue!)!
    }

    @Test("a token forged without any private key does not verify against an exponent-1 key")
    func exponentOneForgery() async throws {
        let n = Self.testModulus
        let header = Base64URL.encode(Array(#"{"alg":"RS512","kid":"weak"}"#.utf8))
        let factory = SETFactory(signer: Self.rsa.signer)
        let claims = factory.claims(type: .accountEnabled, subject: factory.accountSubject("1"), jti: "forged")
        let payload = Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8))
        // With e = 1, "signature^e mod n" is the signature: the EMSA-PKCS1-v1_5 block itself.
        let digestInfo: [UInt8] = [0x30, 0x51, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40]
        let t = digestInfo + SHA512.hash(Array("\(header).\(payload)".utf8))
        let block = [0x00, 0x01] + [UInt8](repeating: 0xFF, count: n.count - t.count - 3) + [0x00] + t
        let forged = "\(header).\(payload).\(Base64URL.encode(block))"
        #expect(throws: JWKError.self) {
            try JWKSet(json: Array(JSONValue.object(["keys": [.object(Self.rsaJWK(n: n, e: [1]))]]).serialized.utf8))
        }
        // Even beside a good key, the weak one is skipped and the forgery is refused.
        let mixed = try JWKSet(
            json: Array(
                JSONValue.object([
                    "keys": [
                        .object(Self.rsaJWK(n: n, e: [1])), .object(Self.rsaJWK(n: n, e: [1, 0, 1], kid: "good")),
                    ]
                ]).serialized.utf8))
        #expect(mixed.keys.count == 1 && mixed.skipped.first?.contains("exponent 1 is below 3") == true)
        let error = await #expect(throws: SETError.self) {
            try await Self.verifier(mixed, algorithms: [.rs512]).verify(Array(forged.utf8), now: 1_800_000_000)
        }
        #expect(error?.code == .invalidKey)
    }

    @Test(
        "even, tiny, huge exponents, even, oversized and ROCA moduli are refused",
        arguments: [
            ("even exponent", [UInt8](), [0x01, 0x00, 0x00] as [UInt8], "even"),
            ("exponent 2^32", [], [0x01, 0x00, 0x00, 0x00, 0x01], "2^32"),
            ("exponent 2048 bits", [], [0x01] + [UInt8](repeating: 0x01, count: 255), "2^32"),
            ("modulus 8200 bits", [0x01] + [UInt8](repeating: 0xFF, count: 1025), [0x01, 0x00, 0x01], "maximum"),
            ("even modulus", [0xC0] + [UInt8](repeating: 0x00, count: 255), [0x01, 0x00, 0x01], "even"),
        ])
    func weakKeys(_ name: String, _ modulus: [UInt8], _ exponent: [UInt8], _ reason: String) throws {
        let n = modulus.isEmpty ? Self.testModulus : modulus
        let error = #expect(throws: JWKError.self) { try JWK(json: Self.rsaJWK(n: n, e: exponent)) }
        #expect(error?.description.contains(reason) == true, "\(name): \(error?.description ?? "")")
        #expect(try JWK(json: Self.rsaJWK(n: Self.testModulus, e: [0x01, 0x00, 0x01])).keyType == "RSA")
        #expect(try JWK(json: Self.rsaJWK(n: Self.testModulus, e: [0x03])).keyType == "RSA")
    }

    // MARK: Duplicate kids

    @Test("with a repeated kid the key that fits the token is used, whatever the order; two that fit are ambiguous")
    func duplicateKid() async throws {
        let ec = Self.keys.entry(for: .es256)!
        let factory = SETFactory(signer: JWSSigner(key: Self.rsa.key, algorithm: .rs256, keyID: "shared"))
        let token = try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("1"))
        let rsaKey = JSONValue.object(Self.rsa.key.publicKey.jwk(keyID: "shared", algorithm: .rs256))
        let ecKey = JSONValue.object(ec.key.publicKey.jwk(keyID: "shared", algorithm: .es256))
        let allowed: Set<JWSAlgorithm> = [.rs256, .es256]
        for order in [[ecKey, rsaKey], [rsaKey, ecKey]] {
            let set = try JWKSet(json: Array(JSONValue.object(["keys": .array(order)]).serialized.utf8))
            #expect(set.keys(for: "shared").count == 2)
            _ = try await Self.verifier(set, algorithms: allowed).verify(Array(token.utf8), now: 1_800_000_000)
        }
        let other = try PrivateKey.generate(.rsa(bits: 2048))
        let twoRSA = try JWKSet(
            json: Array(
                JSONValue.object([
                    "keys": [
                        rsaKey, .object(other.publicKey.jwk(keyID: "shared", algorithm: .rs256)),
                    ]
                ]).serialized.utf8))
        let error = await #expect(throws: SETError.self) {
            try await Self.verifier(twoRSA, algorithms: allowed).verify(Array(token.utf8), now: 1_800_000_000)
        }
        #expect(error?.code == .invalidKey)
        #expect(error?.description.contains("ambiguous") == true)
    }
}
