public import RISCCore

/// The transmitter's configuration document (`/.well-known/risc-configuration`, spec §1.4):
/// risc needs `issuer` and `jwks_uri` from it.
public struct DiscoveryDocument: Sendable, Equatable {
    public let issuer: String
    public let jwksURI: String

    public init(issuer: String, jwksURI: String) {
        self.issuer = issuer
        self.jwksURI = jwksURI
    }

    public init(json bytes: some Collection<UInt8>) throws(JWKError) {
        let object: JSONObject
        do { object = try JSONParser.parseObject(bytes) } catch {
            throw JWKError("discovery document is not a JSON object: \(error)")
        }
        guard let issuer = object["issuer"]?.stringValue, !issuer.isEmpty else {
            throw JWKError("discovery document has no 'issuer' string")
        }
        guard let jwksURI = object["jwks_uri"]?.stringValue, !jwksURI.isEmpty else {
            throw JWKError("discovery document has no 'jwks_uri' string")
        }
        self.init(issuer: issuer, jwksURI: jwksURI)
    }

    /// Google's RISC discovery document.
    public static let googleURL = "https://accounts.google.com/.well-known/risc-configuration"
    /// The issuer Google's discovery document names.
    public static let googleIssuer = Transmitter.googleIssuer
    /// Where Google's signing keys live (shared with its ID tokens).
    public static let googleJWKSHosts = ["www.googleapis.com"]
}
