/// A Security Event Token whose signature verified with the issuer's key and whose claims
/// passed `SETPolicy`. Only `SETVerifier` makes one.
public struct ValidatedSET: Sendable {
    public let token: SecurityEventToken
    public let header: JOSEHeader
    /// The issuer the signing key belongs to (from discovery or configuration).
    public let keyIssuer: String
    /// Non-fatal findings, such as a future `iat`.
    public let warnings: [String]

    /// `iss`, present by construction.
    public var issuer: String { token.issuer ?? keyIssuer }
    /// `jti`, non-empty by construction.
    public var tokenID: String { token.tokenID ?? "" }
    /// `iat`, present by construction.
    public var issuedAt: Double { token.issuedAt ?? 0 }
    public var events: [SecurityEvent] { token.events }

    init(token: SecurityEventToken, header: JOSEHeader, keyIssuer: String, warnings: [String]) {
        self.token = token
        self.header = header
        self.keyIssuer = keyIssuer
        self.warnings = warnings
    }

    /// What `risc verify` prints: header, claims as sent, parsed events, warnings.
    public var json: JSONValue {
        var header = JSONObject()
        header["alg"] = .string(self.header.algorithm.rawValue)
        if let kid = self.header.keyID { header["kid"] = .string(kid) }
        if let typ = self.header.type { header["typ"] = .string(typ) }
        var object = JSONObject()
        object["header"] = .object(header)
        object["claims"] = .object(token.claims)
        object["events"] = .array(events.map(\.json))
        object["warnings"] = .array(warnings.map { .string($0) })
        return .object(object)
    }
}
