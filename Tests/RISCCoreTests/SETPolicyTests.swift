import Foundation
import RISCCore
import RISCTestKit
import Testing

/// Claim and header rules against tokens signed with the committed test keys.
@Suite("SET policy")
struct SETPolicyTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let rs256 = keys.entry(for: .rs256)!
    static let factory = SETFactory(signer: rs256.signer)
    static let now = 1_800_000_000.0

    static func verifier(
        issuer: String = SETFactory.defaultIssuer, algorithms: Set<JWSAlgorithm> = [.rs256], aliases: [String] = []
    ) throws -> SETVerifier {
        SETVerifier(
            policy: SETPolicy(audiences: [SETFactory.defaultAudience, "second-client"], algorithms: algorithms, issuerAliases: aliases),
            keys: StaticKeyProvider(keys: try keys.jwks, issuer: issuer))
    }

    static func claims(_ edit: (inout JSONObject) -> Void = { _ in }) -> JSONObject {
        var claims = factory.claims(type: .sessionsRevoked, subject: factory.accountSubject("1234"), iat: now - 10)
        edit(&claims)
        return claims
    }

    func expectRejected(
        _ token: String, _ code: SETError.Code, verifier: SETVerifier? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let verifier = try verifier ?? Self.verifier()
        do {
            _ = try await verifier.verify(Array(token.utf8), now: Self.now)
            Issue.record("accepted; expected \(code)", sourceLocation: sourceLocation)
        } catch let error as SETError {
            #expect(error.code == code, "\(error.description)", sourceLocation: sourceLocation)
        }
    }

    @Test("a well-formed SET verifies and its event is read")
    func accepts() async throws {
        let validated = try await Self.verifier().verify(Array(try Self.factory.sign(Self.claims()).utf8), now: Self.now)
        #expect(validated.events.map(\.type) == [.sessionsRevoked])
        #expect(validated.events[0].subject?.googleSubject?.subject == "1234")
        #expect(validated.warnings.isEmpty)
    }

    @Test(
        "issuer: one trailing slash difference is tolerated either way; aliases are accepted",
        arguments: [
            ("https://accounts.google.com/", "https://accounts.google.com"),
            ("https://accounts.google.com", "https://accounts.google.com/"),
            ("https://accounts.google.com", "https://accounts.google.com"),
            // Google's third spelling (spec §1.4: its Java sample's issuer; §9 question 1 leaves
            // open which one its SETs carry), the one its ID tokens may carry too.
            ("accounts.google.com", "https://accounts.google.com"), ("accounts.google.com", "https://accounts.google.com/"),
        ])
    func issuerSlash(claimed: String, expected: String) async throws {
        let token = try Self.factory.sign(Self.claims { $0["iss"] = .string(claimed) })
        _ = try await Self.verifier(issuer: expected).verify(Array(token.utf8), now: Self.now)
    }

    @Test(
        "issuer: anything else is invalid_issuer",
        arguments: [
            "https://accounts.google.com//", "https://accounts.google.co", "http://accounts.google.com", "accounts.google.com.evil",
            "https://evil.example/",
        ])
    func issuerRefused(claimed: String) async throws {
        let token = try Self.factory.sign(Self.claims { $0["iss"] = .string(claimed) })
        try await expectRejected(token, .invalidIssuer)
    }

    @Test("issuer aliases and missing iss; only Google's issuer has a bare spelling built in")
    func issuerAliases() async throws {
        let token = try Self.factory.sign(Self.claims { $0["iss"] = "issuer.example" })
        try await expectRejected(token, .invalidIssuer, verifier: try Self.verifier(issuer: "https://issuer.example"))
        _ = try await Self.verifier(issuer: "https://issuer.example", aliases: ["issuer.example"]).verify(Array(token.utf8), now: Self.now)
        try await expectRejected(try Self.factory.sign(Self.claims { $0["iss"] = nil }), .invalidIssuer)
    }

    @Test("audience: string or array holding one of ours")
    func audience() async throws {
        let verifier = try Self.verifier()
        for aud: JSONValue in [["other", "second-client"], "second-client", [.string(SETFactory.defaultAudience)]] {
            _ = try await verifier.verify(Array(try Self.factory.sign(Self.claims { $0["aud"] = aud }).utf8), now: Self.now)
        }
        for aud: JSONValue? in ["other", ["other", "more"], [], nil] {
            try await expectRejected(try Self.factory.sign(Self.claims { $0["aud"] = aud }), .invalidAudience)
        }
        // Each says which: an empty array is no missing claim.
        for (aud, says) in [([], "'aud' is an empty array"), (nil, "no 'aud' claim"), ("other", "names none of our client IDs")] as [(JSONValue?, String)] {
            do {
                _ = try await verifier.verify(Array(try Self.factory.sign(Self.claims { $0["aud"] = aud }).utf8), now: Self.now)
            } catch let error as SETError {
                #expect(error.description.contains(says), "\(error.description)")
            }
        }
        try await expectRejected(try Self.factory.sign(Self.claims { $0["aud"] = 5 }), .invalidRequest)
        try await expectRejected(try Self.factory.sign(Self.claims { $0["aud"] = ["ok", 5] }), .invalidRequest)
    }

    @Test(
        "jti, iat, events: present and well-typed",
        arguments: [
            ("jti", nil), ("jti", ""), ("jti", 5), ("iat", nil), ("iat", "1508184845"), ("events", nil), ("events", [:]),
            ("events", ["https://schemas.openid.net/secevent/risc/event-type/sessions-revoked": "x"]),
            ("events", ["not a uri": [:]]), ("events", [":x": [:]]), ("events", "x"), ("toe", "x"), ("txn", 1), ("sub_id", "x"),
        ] as [(String, JSONValue?)])
    func requiredClaims(name: String, value: JSONValue?) async throws {
        try await expectRejected(try Self.factory.sign(Self.claims { $0[name] = value }), .invalidRequest)
    }

    @Test("exp never rejects, past or future")
    func expIgnored() async throws {
        for exp in [1.0, Self.now - 1, Self.now + 3_600] {
            _ = try await Self.verifier().verify(Array(try Self.factory.sign(Self.claims { $0["exp"] = .number(exp) }).utf8), now: Self.now)
        }
    }

    @Test("a future iat beyond the skew allowance is a warning, not a rejection")
    func futureIssuedAt() async throws {
        let token = try Self.factory.sign(Self.claims { $0["iat"] = .number(Self.now + 3_600) })
        let validated = try await Self.verifier().verify(Array(token.utf8), now: Self.now)
        #expect(validated.warnings.count == 1)
        let near = try Self.factory.sign(Self.claims { $0["iat"] = .number(Self.now + 60) })
        #expect(try await Self.verifier().verify(Array(near.utf8), now: Self.now).warnings.isEmpty)
    }

    @Test("typ: secevent+jwt forms pass, and the generic JWT (Google's header is not documented); another type is refused")
    func typ() async throws {
        // spec §9 question 2 leaves open whether Google's header carries typ, and which: the
        // generic "JWT" says no more than no typ at all, so it is read as none, and the claims'
        // shape (events, not an ID token) decides. A type naming another kind of JWT is refused.
        for typ in ["secevent+jwt", "application/secevent+jwt", "SecEvent+JWT", "JWT", "jwt", "application/jwt"] {
            let token = try Self.factory.sign(Self.claims(), header: ["typ": .string(typ)])
            _ = try await Self.verifier().verify(Array(token.utf8), now: Self.now)
        }
        for typ: JSONValue in ["at+jwt", "application/at+jwt", "JWT ", "secevent", "", 1, .null] {
            try await expectRejected(try Self.factory.sign(Self.claims(), header: ["typ": typ]), .invalidRequest)
        }
    }

    @Test("SSF's dialect wants typ secevent+jwt: the generic JWT is refused there, as no typ is")
    func typRequired() async throws {
        var policy = SETPolicy(audiences: [SETFactory.defaultAudience])
        policy.requiresType = true
        let verifier = SETVerifier(policy: policy, keys: StaticKeyProvider(keys: try Self.keys.jwks, issuer: SETFactory.defaultIssuer))
        for typ: JSONValue? in [nil, "JWT", "application/jwt"] {
            let header: JSONObject = typ.map { ["typ": $0] } ?? [:]
            try await expectRejected(try Self.factory.sign(Self.claims(), header: header), .invalidRequest, verifier: verifier)
        }
        let typed = try Self.factory.sign(Self.claims(), header: ["typ": "secevent+jwt"])
        _ = try await verifier.verify(Array(typed.utf8), now: Self.now)
    }

    @Test("a Google ID token shape is refused: no events, or nonce, or sub with exp")
    func idTokenLookalike() async throws {
        var idToken = JSONObject()
        idToken["iss"] = "https://accounts.google.com"
        idToken["aud"] = .string(SETFactory.defaultAudience)
        idToken["sub"] = "1234"
        idToken["email"] = "user@example.com"
        idToken["iat"] = .number(Self.now)
        idToken["exp"] = .number(Self.now + 3_600)
        try await expectRejected(try Self.factory.sign(idToken, header: ["typ": "JWT"]), .invalidRequest)
        try await expectRejected(try Self.factory.sign(idToken), .invalidRequest)
        try await expectRejected(try Self.factory.sign(Self.claims { $0["nonce"] = "n" }), .invalidRequest)
        try await expectRejected(
            try Self.factory.sign(
                Self.claims {
                    $0["sub"] = "1234"; $0["exp"] = .number(Self.now + 60)
                }), .invalidRequest)
    }

    @Test("header rules: crit, missing or non-string kid, unknown kid, alg allow-list")
    func headerRules() async throws {
        try await expectRejected(try Self.factory.sign(Self.claims(), header: ["crit": ["exp"], "exp": 1]), .invalidRequest)
        let noKid = JWSSigner(key: Self.rs256.key, algorithm: .rs256, keyID: nil)
        try await expectRejected(try noKid.sign(claims: Self.claims()), .invalidRequest)
        try await expectRejected(try noKid.sign(claims: Self.claims(), header: ["kid": 7]), .invalidRequest)
        let unknown = JWSSigner(key: Self.rs256.key, algorithm: .rs256, keyID: "no-such-kid")
        try await expectRejected(try unknown.sign(claims: Self.claims()), .invalidKey)
        // A header claiming RS384 over an RS256-pinned key: refused by the allow-list, then by the key's alg.
        let rs384 = JWSSigner(key: Self.rs256.key, algorithm: .rs384, keyID: Self.rs256.keyID)
        try await expectRejected(try rs384.sign(claims: Self.claims()), .invalidRequest)
        try await expectRejected(try rs384.sign(claims: Self.claims()), .invalidKey, verifier: try Self.verifier(algorithms: [.rs256, .rs384]))
    }

    @Test("duplicate claim names are refused")
    func duplicateClaims() async throws {
        let payload = Array(
            #"{"iss":"https://accounts.google.com/","iss":"https://evil/","aud":"second-client","jti":"j","iat":1,"events":{"https://schemas.openid.net/secevent/risc/event-type/verification":{}}}"#
                .utf8)
        let token = try Self.rs256.signer.sign(payload: payload)
        try await expectRejected(token, .invalidRequest)
        // Found: the answer said only "JWT claims are not a JSON object", for a payload that is one
        // (a transmitter's developer looked for the wrong fault). It says what is wrong, and where,
        // echoing nothing of the token.
        for (payload, reason) in [
            (payload, "JWT claims are not a valid JSON object: duplicate member name at byte 38"), (Array("[1]".utf8), "JWT claims are not a valid JSON object: expected a JSON object"),
            (Array(#"{"iss":"x","#.utf8), "JWT claims are not a valid JSON object: expected member name at byte 11"),
        ] {
            await #expect { _ = try await Self.verifier().verify(Array(try Self.rs256.signer.sign(payload: payload).utf8), now: Self.now) } throws: { error in
                String(describing: error).contains(reason) && !String(describing: error).contains("evil")
            }
        }
        let header = Base64URL.encode(Array(#"{"alg":"RS256","alg":"none"}"#.utf8)) + "." + Base64URL.encode(payload) + ".c2ln"
        await #expect { _ = try await Self.verifier().verify(Array(header.utf8), now: Self.now) } throws: { error in
            String(describing: error).contains("JWS header is not a valid JSON object: duplicate member name at byte 15")
        }
    }

    @Test("ES256 and Ed25519 tokens verify once enabled, and are refused by the RS256 default")
    func otherAlgorithms() async throws {
        for algorithm in [JWSAlgorithm.es256, .eddsa] {
            let entry = try #require(Self.keys.entry(for: algorithm))
            let token = try SETFactory(signer: entry.signer).sign(Self.claims())
            _ = try await Self.verifier(algorithms: [algorithm]).verify(Array(token.utf8), now: Self.now)
            try await expectRejected(token, .invalidRequest)
        }
    }

    @Test("an ES256 signature in DER instead of raw r‖s fails")
    func ecdsaDER() async throws {
        let entry = try #require(Self.keys.entry(for: .es256))
        let token = try SETFactory(signer: entry.signer).sign(Self.claims())
        let parts = token.split(separator: ".")
        var raw = try #require(Base64URL.decode(String(parts[2])))
        #expect(raw.count == 64)
        // DER SEQUENCE { INTEGER r, INTEGER s } with both high bits cleared to keep it simple.
        raw[0] &= 0x7F
        raw[32] &= 0x7F
        let der: [UInt8] = [0x30, 68, 0x02, 32] + raw[0..<32] + [0x02, 32] + raw[32..<64]
        try await expectRejected(
            "\(parts[0]).\(parts[1]).\(Base64URL.encode(der))", .authenticationFailed,
            verifier: try Self.verifier(algorithms: [.es256]))
    }

    @Test("key rules: a JWK alg that differs, use other than sig, RSA under 2048 bits")
    func keyRules() async throws {
        let token = try Self.factory.sign(Self.claims())
        let publicKey = Self.rs256.key.publicKey
        for jwk in [
            JWK(keyID: Self.rs256.keyID, algorithm: .ps256, key: publicKey),
            JWK(keyID: Self.rs256.keyID, algorithm: nil, use: "enc", key: publicKey),
        ] {
            let verifier = SETVerifier(
                policy: SETPolicy(audiences: [SETFactory.defaultAudience]),
                keys: StaticKeyProvider(keys: JWKSet(keys: [jwk]), issuer: SETFactory.defaultIssuer))
            try await expectRejected(token, .invalidKey, verifier: verifier)
        }
        let small = try PrivateKey.generate(.rsa(bits: 1024))
        let smallToken = try SETFactory(signer: JWSSigner(key: small, algorithm: .rs256, keyID: "small")).sign(Self.claims())
        let verifier = SETVerifier(
            policy: SETPolicy(audiences: [SETFactory.defaultAudience]),
            keys: StaticKeyProvider(keys: JWKSet(keys: [JWK(keyID: "small", key: small.publicKey)]), issuer: SETFactory.defaultIssuer))
        try await expectRejected(smallToken, .invalidKey, verifier: verifier)
    }

    @Test("surrounding whitespace is trimmed; an empty body is invalid_request")
    func whitespace() async throws {
        let token = try Self.factory.sign(Self.claims())
        _ = try await Self.verifier().verify(Array("\n \(token)\r\n".utf8), now: Self.now)
        try await expectRejected("  \n", .invalidRequest)
        try await expectRejected("a.b", .invalidRequest)
        try await expectRejected("a.b.c.d", .invalidRequest)
        try await expectRejected(token.replacingOccurrences(of: ".", with: ". "), .invalidRequest)
    }

    @Test("descriptions never echo the token or its claims")
    func descriptionsAreSafe() async throws {
        let token = try Self.factory.sign(Self.claims { $0["aud"] = "secret-looking-audience-value" })
        do {
            _ = try await Self.verifier().verify(Array(token.utf8), now: Self.now)
        } catch let error as SETError {
            #expect(!error.responseBody.contains("secret-looking"))
            #expect(!error.responseBody.contains(String(token.prefix(20))))
            let body = try JSONParser.parseObject(Array(error.responseBody.utf8))
            #expect(body.keys == ["err", "description"])
        }
    }
}
