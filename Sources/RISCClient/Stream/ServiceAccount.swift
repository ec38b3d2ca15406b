import Foundation
public import RISCCore

/// A Google service account's JSON key file, as the RISC management API wants it used (spec
/// §1.10.1): a self-signed RS256 JWT per call, `iss` = `sub` = the client email, `aud` = the
/// RISC management service, valid one hour, header `kid` = the key's id.
///
/// The private key stays in memory in OpenSSL's hands; `description` never shows it, and
/// nothing writes it anywhere.
public struct ServiceAccount: Sendable, CustomStringConvertible {
    public let clientEmail: String
    public let privateKeyID: String
    public let projectID: String?
    let signer: JWSSigner

    public static let audience = "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService"
    /// The token's lifetime: Google's samples make it exactly one hour.
    public static let lifetime: Double = 3_600

    public var description: String { "ServiceAccount(\(clientEmail), key \(privateKeyID))" }

    /// Problems with a key file, named without echoing its contents.
    public struct KeyFileError: Error, CustomStringConvertible {
        public let description: String
        init(_ path: String, _ problem: String) { description = "service account key file \(path): \(problem)" }
    }

    /// Reads `path` (the JSON key downloaded from the Cloud console).
    public init(keyFile path: String) throws {
        let data: [UInt8]
        do { data = try FileContents.readText(path) } catch { throw KeyFileError(path, "cannot read it: \(error.reason)") }
        let object: JSONObject
        do { object = try JSONParser.parseObject(data) } catch { throw KeyFileError(path, "not a JSON object") }
        try self.init(json: object, path: path)
    }

    public init(json object: JSONObject, path: String = "(inline)") throws {
        if let type = object["type"]?.stringValue, type != "service_account" {
            throw KeyFileError(path, "type is '\(type.prefix(40))', expected 'service_account' (a user or OAuth client file will not do)")
        }
        guard let email = object["client_email"]?.stringValue, email.contains("@") else {
            throw KeyFileError(path, "no 'client_email'")
        }
        guard let keyID = object["private_key_id"]?.stringValue, !keyID.isEmpty else { throw KeyFileError(path, "no 'private_key_id'") }
        guard let pem = object["private_key"]?.stringValue else { throw KeyFileError(path, "no 'private_key'") }
        let key: PrivateKey
        do { key = try PrivateKey(pem: pem) } catch { throw KeyFileError(path, "'private_key' is not a PEM private key OpenSSL can read") }
        guard key.publicKey.fits(.rs256) else { throw KeyFileError(path, "'private_key' is not an RSA key") }
        if let weakness = key.publicKey.weakness { throw KeyFileError(path, "'private_key': \(weakness)") }
        clientEmail = email
        privateKeyID = keyID
        projectID = object["project_id"]?.stringValue
        signer = JWSSigner(key: key, algorithm: .rs256, keyID: keyID)
    }

    /// The claims of a bearer token issued at `now`.
    public func claims(now: Double) -> JSONObject {
        let iat = now.rounded(.down)
        var claims = JSONObject()
        claims["iss"] = .string(clientEmail)
        claims["sub"] = .string(clientEmail)
        claims["aud"] = .string(Self.audience)
        claims["iat"] = .number(iat)
        claims["exp"] = .number(iat + Self.lifetime)
        return claims
    }

    /// A signed bearer token for the RISC management API.
    public func bearerToken(now: Double = systemNow()) throws -> String {
        try signer.sign(claims: claims(now: now), header: ["typ": "JWT"])
    }
}
