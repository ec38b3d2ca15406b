import RISCCore
import RISCTestKit
import Testing

@Suite("Subjects and event types")
struct SubjectAndEventTests {
    @Test(
        "Google and RFC 9493 subject forms",
        arguments: [
            (#"{"subject_type":"iss-sub","iss":"https://accounts.google.com/","sub":"1"}"#, Subject.issuerSubject(issuer: "https://accounts.google.com/", subject: "1")),
            (#"{"subject_type":"iss_sub","iss":"i","sub":"1"}"#, .issuerSubject(issuer: "i", subject: "1")),
            (#"{"format":"iss_sub","iss":"i","sub":"1"}"#, .issuerSubject(issuer: "i", subject: "1")),
            (#"{"subject_type":"id_token_claims","iss":"i","sub":"1","email":"a@b"}"#, .idTokenClaims(issuer: "i", subject: "1", email: "a@b", phoneNumber: nil)),
            (#"{"subject_type":"id_token_claims","email":"a@b"}"#, .idTokenClaims(issuer: nil, subject: nil, email: "a@b", phoneNumber: nil)),
            (#"{"subject_type":"email","email":"a@b"}"#, .email("a@b")),
            (#"{"format":"phone_number","phone_number":"+1"}"#, .phoneNumber("+1")),
            (#"{"format":"account","uri":"acct:a@b"}"#, .account(uri: "acct:a@b")),
            (#"{"format":"opaque","id":"x"}"#, .opaque(id: "x")),
            (#"{"format":"did","url":"did:x:1"}"#, .did(url: "did:x:1")),
            (
                #"{"format":"aliases","identifiers":[{"format":"email","email":"a@b"},{"format":"iss_sub","iss":"i","sub":"1"}]}"#,
                .aliases([.email("a@b"), .issuerSubject(issuer: "i", subject: "1")])
            ),
            (
                #"{"subject_type":"oauth_token","token_type":"refresh_token","token_identifier_alg":"prefix","token":"1//0gexample-ref"}"#,
                .oauthToken(OAuthTokenIdentifier(tokenType: "refresh_token", algorithm: .prefix, token: "1//0gexample-ref"))
            ),
        ])
    func forms(json: String, expected: Subject) throws {
        #expect(try Subject.parse(JSONParser.parseObject(Array(json.utf8))) == expected)
    }

    @Test(
        "malformed subjects are invalid_request",
        arguments: [
            #"{"subject_type":"iss-sub","iss":"i"}"#, #"{"subject_type":"iss-sub","iss":"i","sub":""}"#,
            #"{"subject_type":"iss-sub","iss":"i","sub":1}"#, #"{"subject_type":"id_token_claims"}"#,
            #"{"format":"aliases","identifiers":[]}"#, #"{"format":"aliases","identifiers":[{"format":"aliases","identifiers":[{"format":"opaque","id":"x"}]}]}"#,
            #"{"subject_type":"oauth_token","token_type":"refresh_token","token":"x"}"#, #"{"sub":"1"}"#, #"{"format":5}"#,
        ])
    func malformed(json: String) throws {
        let error = #expect(throws: SETError.self) { try Subject.parse(JSONParser.parseObject(Array(json.utf8))) }
        #expect(error?.code == .invalidRequest)
    }

    @Test("SSF complex subjects (§3.2): parts kept by name in SSF's order; the user part names the account; malformed parts refused")
    func complexSubjects() throws {
        func parse(_ text: String) throws -> Subject { try Subject.parse(JSONParser.parseObject(Array(text.utf8))) }
        let subject = try parse(
            #"{"device":{"format":"uri","uri":"urn:device:7"},"session":{"format":"opaque","id":"s1"},"user":{"format":"email","email":"a@example.com"},"x-extra":{"format":"opaque","id":"e"}}"#)
        guard case .complex(let parts) = subject else { Issue.record("not complex: \(subject)"); return }
        #expect(parts.map(\.name) == ["user", "session", "device", "x-extra"])
        #expect(subject.member("session") == .opaque(id: "s1") && subject.member("group") == nil)
        #expect(subject.email == "a@example.com" && subject.googleSubject == nil)
        #expect(subject.json.objectValue?["type"] == "complex" && subject.json.objectValue?["session"]?.objectValue?["id"] == "s1")
        let google = try parse(#"{"user":{"format":"iss_sub","iss":"https://accounts.google.com/","sub":"110169484474386276334"},"tenant":{"format":"opaque","id":"t"}}"#)
        #expect(google.googleSubject?.subject == "110169484474386276334")
        let reordered = try parse(#"{"tenant":{"format":"opaque","id":"t"},"user":{"format":"iss_sub","iss":"https://accounts.google.com/","sub":"110169484474386276334"}}"#)
        #expect(google != subject && google == reordered)
        for bad in [
            #"{"user":"someone"}"#, #"{"user":{"format":"iss_sub","iss":"i"}}"#, #"{"user":{"user":{"format":"email","email":"a"}}}"#,
            #"{"session":{"format":"aliases","identifiers":[{"format":"opaque","id":"x"}]}}"#,
        ] {
            #expect(throws: SETError.self, "\(bad)") { try parse(bad) }
        }
    }

    @Test("SSF's txn and CAEP's event_timestamp are read; an event_timestamp in milliseconds is read as such; a wrong one is invalid_request")
    func transactionAndEventTime() throws {
        func token(_ timestamp: String) throws -> SecurityEventToken {
            try SecurityEventToken(
                payload: Array(
                    #"{"iss":"https://idp.example","jti":"t1","iat":1800000000,"aud":"a","txn":"8675309","sub_id":{"format":"email","email":"a@example.com"},"events":{"https://schemas.openid.net/secevent/caep/event-type/session-revoked":{"event_timestamp":\#(timestamp)}}}"#
                        .utf8))
        }
        let seconds = try token("1799999999")
        #expect(seconds.transactionID == "8675309")
        #expect(seconds.events.first?.eventTimestamp == 1_799_999_999 && seconds.events.first?.subject == .email("a@example.com"))
        #expect(try token("1799999999500").events.first?.eventTimestamp == 1_799_999_999.5)
        for bad in ["\"yesterday\"", "-5"] {
            #expect(throws: SETError.self, "\(bad)") { try token(bad) }
        }
    }

    @Test("unknown forms are kept")
    func unknownForm() throws {
        let subject = try Subject.parse(JSONParser.parseObject(Array(#"{"format":"x-custom","a":"b"}"#.utf8)))
        guard case .other(let form, _) = subject else { Issue.record("not kept"); return }
        #expect(form == "x-custom")
    }

    @Test("Google's seven types, legacy aliases and unknown types")
    func types() {
        #expect(EventType.google.count == 7)
        #expect(EventType.tokensRevoked.uri.contains("/oauth/"))
        #expect(EventType.tokenRevoked.uri.contains("/oauth/"))
        #expect(EventType("https://accounts.google.com/risc/event/one-token-revoked").canonical == .tokenRevoked)
        #expect(EventType("https://accounts.google.com/risc/event/all-token-revoked").canonical == .tokensRevoked)
        #expect(EventType("https://accounts.google.com/risc/event/account-disabled").canonical == .accountDisabled)
        let unknown = EventType("https://example.com/event/new-thing")
        #expect(!unknown.isKnown && unknown.canonical == unknown)
        #expect(EventType(name: "account-disabled") == .accountDisabled)
        #expect(EventType(name: "session-revoked") == .sessionRevoked)
        #expect(EventType(name: "nonsense") == nil)
    }

    @Test("events: unknown types are kept; known types without a subject are refused; sub_id is the fallback subject")
    func eventsInTokens() async throws {
        let keys = try KeyDirectory.repositoryTestKeys()
        let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
        let verifier = SETVerifier(
            policy: SETPolicy(audiences: [SETFactory.defaultAudience]),
            keys: StaticKeyProvider(keys: try keys.jwks, issuer: SETFactory.defaultIssuer))
        func verify(_ claims: JSONObject) async throws -> ValidatedSET {
            try await verifier.verify(Array(try factory.sign(claims).utf8), now: 1_800_000_000)
        }
        let unknown = try await verify(factory.claims(type: EventType("https://example.com/e/new"), subject: nil))
        #expect(unknown.events.first?.type.isKnown == false)
        let verification = try await verify(factory.claims(type: .verification, subject: nil, extra: ["state": "abc"]))
        #expect(verification.events.first?.state == "abc")
        await #expect(throws: SETError.self) { try await verify(factory.claims(type: .sessionsRevoked, subject: nil)) }
        await #expect(throws: SETError.self) {
            try await verify(factory.claims(type: .tokenRevoked, subject: factory.accountSubject("1")))
        }
        await #expect(throws: SETError.self) {
            try await verify(factory.claims(type: .accountDisabled, subject: factory.accountSubject("1"), extra: ["reason": 5]))
        }
        var withSubID = factory.claims(type: .sessionsRevoked, subject: nil)
        withSubID["sub_id"] = ["format": "iss_sub", "iss": "https://accounts.google.com/", "sub": "42"]
        #expect(try await verify(withSubID).events.first?.subject?.googleSubject?.subject == "42")
        let legacy = try await verify(
            factory.claims(
                type: EventType("https://accounts.google.com/risc/event/sessions-revoked"), subject: factory.accountSubject("1")))
        #expect(legacy.events.first?.type.canonical == .sessionsRevoked)
    }
}
