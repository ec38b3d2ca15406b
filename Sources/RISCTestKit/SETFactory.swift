import Foundation
public import RISCCore

/// Builds Security Event Tokens shaped like Google's (spec §1.6) and signs them.
public struct SETFactory: Sendable {
    public var issuer: String
    public var audience: String
    public var signer: JWSSigner

    public init(issuer: String = SETFactory.defaultIssuer, audience: String = SETFactory.defaultAudience, signer: JWSSigner) {
        self.issuer = issuer
        self.audience = audience
        self.signer = signer
    }

    public static let defaultIssuer = "https://accounts.google.com/"
    public static let defaultAudience = "risc-test-client.apps.googleusercontent.com"

    /// An `iss-sub` subject for a Google account ID.
    public func accountSubject(_ sub: String) -> JSONValue {
        ["subject_type": "iss-sub", "iss": .string(issuer), "sub": .string(sub)]
    }

    /// An `oauth_token` subject naming `refreshToken` by prefix or double hash.
    public static func tokenSubject(refreshToken: String, algorithm: OAuthTokenIdentifier.Algorithm) -> JSONValue {
        let identifier =
            algorithm == .prefix
            ? String(refreshToken.prefix(16)) : SHA512.doubleHashBase64(refreshToken)
        return [
            "subject_type": "oauth_token", "token_type": "refresh_token",
            "token_identifier_alg": .string(algorithm.rawValue), "token": .string(identifier),
        ]
    }

    /// The claims of a one-event SET.
    public func claims(
        type: EventType, subject: JSONValue?, extra: JSONObject = JSONObject(), jti: String? = nil, iat: Double? = nil
    ) -> JSONObject {
        var event = JSONObject()
        if let subject { event["subject"] = subject }
        for (name, value) in extra { event[name] = value }
        var claims = JSONObject()
        claims["iss"] = .string(issuer)
        claims["aud"] = .string(audience)
        claims["iat"] = .number(iat ?? systemNow().rounded(.down))
        claims["jti"] = .string(jti ?? UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
        claims["events"] = .object(JSONObject([type.uri: .object(event)]))
        return claims
    }

    /// A signed one-event SET.
    public func make(
        type: EventType, subject: JSONValue?, extra: JSONObject = JSONObject(), jti: String? = nil, iat: Double? = nil,
        header: JSONObject = JSONObject()
    ) throws -> String {
        try signer.sign(claims: claims(type: type, subject: subject, extra: extra, jti: jti, iat: iat), header: header)
    }

    /// Signs arbitrary claims.
    public func sign(_ claims: JSONObject, header: JSONObject = JSONObject()) throws -> String {
        try signer.sign(claims: claims, header: header)
    }
}

extension SETFactory {
    /// A signed one-event SET, verified against `keys` and wrapped as the store keeps it: what a
    /// delivery becomes after intake, for store, worker and sink tests and benchmarks.
    public func storedRecord(
        type: EventType, subject: JSONValue?, extra: JSONObject = JSONObject(), jti: String? = nil, iat: Double? = nil,
        keys: JWKSet, receivedAt: Double = 3_000
    ) async throws -> SETRecord {
        let token = try make(type: type, subject: subject, extra: extra, jti: jti, iat: iat)
        let verifier = SETVerifier(
            policy: SETPolicy(audiences: [audience], algorithms: [signer.algorithm]),
            keys: StaticKeyProvider(keys: keys, issuer: issuer))
        let validated = try await verifier.verify(Array(token.utf8), now: 1e10)
        return SETRecord(validated: validated, token: token, receivedAt: receivedAt, remoteAddress: nil, contentType: nil)
    }
}
