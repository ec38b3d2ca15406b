import Foundation
import RISCCore

/// Tokens a receiver must refuse, each with the answer it should give: for `risc sign --negative`
/// and for tests of one's own setup.
public enum NegativeTokens {
    public struct Kind: Sendable {
        public let name: String
        public let expected: String
        public let summary: String
    }

    public static let kinds: [Kind] = [
        Kind(name: "alg-none", expected: "400 invalid_request", summary: "unsecured JWS (alg none, empty signature)"),
        Kind(name: "hs256-confusion", expected: "400 invalid_request", summary: "HS256 keyed with the public key (RFC 8725 §2.1)"),
        Kind(name: "wrong-aud", expected: "400 invalid_audience", summary: "aud names another client"),
        Kind(name: "wrong-iss", expected: "400 invalid_issuer", summary: "iss is not the issuer"),
        Kind(name: "unknown-kid", expected: "400 invalid_key", summary: "kid not in the key set"),
        Kind(name: "tampered-payload", expected: "400 authentication_failed", summary: "payload changed after signing"),
        Kind(name: "flipped-signature", expected: "400 authentication_failed", summary: "one signature bit flipped"),
        Kind(name: "id-token-lookalike", expected: "400 invalid_request", summary: "a signed Google-ID-token-shaped JWT, no events"),
        Kind(name: "missing-events", expected: "400 invalid_request", summary: "a SET without its events claim"),
        Kind(name: "oversized", expected: "413", summary: "a valid-looking token over 64 KiB"),
    ]

    /// The token for `name`, or nil for an unknown name.
    public static func make(_ name: String, factory: SETFactory) throws -> String? {
        let claims = factory.claims(type: .sessionsRevoked, subject: factory.accountSubject("7375626A656374"))
        let good = try factory.sign(claims)
        let parts = good.split(separator: ".").map(String.init)
        func header(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }
        let kid = factory.signer.keyID ?? ""
        switch name {
        case "alg-none":
            return "\(header(#"{"alg":"none","kid":"\#(kid)"}"#)).\(parts[1])."
        case "hs256-confusion":
            let signingHeader = header(#"{"alg":"HS256","kid":"\#(kid)"}"#)
            let publicKey = Array(JSONValue.object(factory.signer.key.publicKey.jwk(keyID: kid, algorithm: nil)).serialized.utf8)
            let mac = HMACSHA256.mac(key: publicKey, data: Array("\(signingHeader).\(parts[1])".utf8))
            return "\(signingHeader).\(parts[1]).\(Base64URL.encode(mac))"
        case "wrong-aud":
            var edited = claims
            edited["aud"] = "someone-else.apps.googleusercontent.com"
            return try factory.sign(edited)
        case "wrong-iss":
            var edited = claims
            edited["iss"] = "https://accounts.example.com/"
            return try factory.sign(edited)
        case "unknown-kid":
            return try JWSSigner(key: factory.signer.key, algorithm: factory.signer.algorithm, keyID: "no-such-kid").sign(claims: claims)
        case "tampered-payload":
            var edited = claims
            edited["jti"] = "tampered"
            return "\(parts[0]).\(Base64URL.encode(Array(JSONValue.object(edited).serialized.utf8))).\(parts[2])"
        case "flipped-signature":
            var signature = Base64URL.decode(parts[2]) ?? []
            signature[signature.count / 2] ^= 0x01
            return "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
        case "id-token-lookalike":
            let now = systemNow().rounded(.down)
            return try factory.sign(
                [
                    "iss": .string(factory.issuer), "aud": .string(factory.audience), "sub": "110169484474386276334",
                    "email": "user@example.com", "iat": .number(now), "exp": .number(now + 3_600),
                ], header: ["typ": "JWT"])
        case "missing-events":
            var edited = claims
            edited["events"] = nil
            return try factory.sign(edited)
        case "oversized":
            var edited = claims
            edited["padding"] = .string(String(repeating: "A", count: 70 * 1024))
            return try factory.sign(edited)
        default:
            return nil
        }
    }
}
