import Foundation
import RISCCore
import Testing

/// Issue 15 §3: what an unlink notice says, computed from the fingerprint risc keeps.
@Suite("Unlink notice records")
struct UnlinkNoticeRecordTests {
    /// The spec's token vector (§1.9): its `hash_base64_sha512_sha512` as risc stores it, and the
    /// same digest in lowercase hex (decoded with Python's base64 and checked against hashlib).
    static let token = "1//0gexample-refresh-token-for-tests"
    static let stored = "OppiN/j+J2CyqCr3JNTEywnHlyIQSI9bS3lZ/7HquLzb2qSEtl14TF+4Pq9Skghb1d9jqzDkJK1Y6U3BUVxO3g=="
    static let hex = "3a9a6237f8fe2760b2a82af724d4c4cb09c7972210488f5b4b7959ffb1eab8bcdbdaa484b65d784c5fb83eaf5292085bd5df63ab30e424ad58e94dc1515c4ede"

    @Test("hash_SHA512_double is the stored fingerprint in lowercase hex; a fingerprint of the wrong size is refused")
    func identifier() {
        #expect(TokenFingerprint(token: Self.token, key: [1]).hash == Self.stored)
        #expect(UnlinkNotices.hexIdentifier(fromStoredHash: Self.stored) == Self.hex)
        // Either base64 alphabet, padded or not, as events carry them.
        let url = Self.stored.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(UnlinkNotices.hexIdentifier(fromStoredHash: url) == Self.hex)
        #expect(UnlinkNotices.hexIdentifier(fromStoredHash: "AAAA") == nil)
        #expect(UnlinkNotices.hexIdentifier(fromStoredHash: "not base64!") == nil)
    }

    @Test("the queued record carries exactly the claims to publish: iss, aud, iat, jti, one token-revoked event, no exp")
    func record() throws {
        let notices = UnlinkNotices(issuer: "https://site.example/risc", tokenKey: Array(repeating: 7, count: 32))
        let notice = try notices.record(tokenHash: Self.stored, now: 1_700_000_000.75)
        #expect(notice.issuer == UnlinkNotices.queueIssuer)
        #expect(notice.claimedIssuer == "https://site.example/risc")
        let claims = try JSONParser.parseObject(try CompactJWS(Array(notice.token.utf8)).payload)
        #expect(Set(claims.keys) == ["iss", "aud", "iat", "jti", "events"])
        #expect(claims["aud"]?.stringValue == "google_account_linking")
        #expect(claims["iat"]?.numberValue == 1_700_000_000)
        #expect(claims["jti"]?.stringValue == notice.tokenID)
        let event = try #require(claims["events"]?.objectValue?["https://schemas.openid.net/secevent/oauth/event-type/token-revoked"]?.objectValue)
        #expect(event["subject_type"]?.stringValue == "oauth_token")
        #expect(event["token_type"]?.stringValue == "refresh_token")
        #expect(event["token_identifier_alg"]?.stringValue == "hash_SHA512_double")
        #expect(event["token"]?.stringValue == Self.hex)
        // The same token queued again is the same notice; another token is another.
        #expect(try notices.record(tokenHash: Self.stored, tokenType: "access_token", now: 5).tokenID == notice.tokenID)
        let other = TokenFingerprint(token: "another", key: [1]).hash
        #expect(try notices.record(tokenHash: other, now: 5).tokenID != notice.tokenID)
        #expect(throws: UnlinkNoticeError.self) { try notices.record(tokenHash: "AAAA", now: 5) }
        // Never the raw token, anywhere in the row.
        #expect(!notice.token.contains(Self.token) && !notice.subjectsJSON.contains(Self.token))
    }

    /// Found: an RSA key under 2048 bits (one made by hand with `openssl genrsa 1024`) was loaded
    /// and signed notices that Google, and any careful verifier, refuses (RFC 7518 §3.3); so did a
    /// service account's. Both are refused when loaded, saying why.
    @Test("a notice key directory holding an RSA key under 2048 bits is refused, naming it")
    func weakNoticeKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-weak-notice-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(try PrivateKey.generate(.rsa(bits: 1024)).pemRepresentation.utf8).write(to: directory.appendingPathComponent("weak.pem"))
        try Data(#"{"keys": [{"kty": "RSA", "kid": "weak", "alg": "RS256"}]}"#.utf8).write(to: directory.appendingPathComponent("jwks.json"))
        do {
            _ = try TransmitterKeys(directory: directory.path)
            Issue.record("a 1024-bit key was loaded")
        } catch let error as TransmitterKeys.LoadError {
            #expect(error.description.contains("weak.pem") && error.description.contains("1024 bits is under the 2048-bit minimum"), "\(error)")
        }
    }

    @Test("the documents' paths are the issuer's path and below")
    func paths() {
        #expect(UnlinkNotices.path(of: UnlinkNotices.discoveryURL(issuer: "https://site.example/risc")) == "/risc/.well-known/risc-configuration")
        #expect(UnlinkNotices.path(of: UnlinkNotices.jwksURL(issuer: "https://site.example")) == "/.well-known/jwks.json")
        #expect(UnlinkNotices.path(of: "https://site.example") == "/")
        #expect(UnlinkNotices.path(of: "https://site.example/a?b#c") == "/a")
    }
}
