/// Produces compact JWS strings (for `risc sign`, the test kit and the RISC API bearer JWT).
public struct JWSSigner: Sendable {
    public let key: PrivateKey
    public let algorithm: JWSAlgorithm
    public let keyID: String?

    public init(key: PrivateKey, algorithm: JWSAlgorithm, keyID: String?) {
        self.key = key
        self.algorithm = algorithm
        self.keyID = keyID
    }

    /// Signs `payload` under a header of `alg`, `kid` (when set) and the given extra members.
    public func sign(payload: [UInt8], header extra: JSONObject = JSONObject()) throws(OpenSSLError) -> String {
        var header = JSONObject()
        header["alg"] = .string(algorithm.rawValue)
        if let keyID { header["kid"] = .string(keyID) }
        for (name, value) in extra { header[name] = value }
        let signingInput = Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(signingInput.utf8), algorithm: algorithm)
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Signs a JSON object as the payload.
    public func sign(claims: JSONObject, header extra: JSONObject = JSONObject()) throws(OpenSSLError) -> String {
        try sign(payload: Array(JSONValue.object(claims).serialized.utf8), header: extra)
    }
}
