import CRiscOpenSSL

/// A key set or key that cannot be used, with the reason (for logs; never sent to a peer).
public struct JWKError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One public key from a JWK Set (RFC 7517 §4), with the members that constrain its use.
public struct JWK: Sendable {
    /// `kid`: the only way risc selects a key (RFC 8725 §3.10: a lookup key, nothing more).
    public let keyID: String?
    /// `kty`: `RSA`, `EC` or `OKP`.
    public let keyType: String
    /// `alg`, when the set pins one: the token's `alg` must then equal it.
    public let algorithm: JWSAlgorithm?
    /// `use`, when present: must be `sig` to verify.
    public let use: String?
    /// `key_ops`, when present: must include `verify`.
    public let keyOperations: [String]?
    public let key: PublicKey

    public init(keyID: String?, algorithm: JWSAlgorithm? = nil, use: String? = "sig", key: PublicKey) {
        self.keyID = keyID
        self.algorithm = algorithm
        self.use = use
        self.keyOperations = nil
        self.key = key
        switch key.kind {
        case .rsa: keyType = "RSA"
        case .ec: keyType = "EC"
        case .ed25519: keyType = "OKP"
        }
    }

    /// Reads a public JWK object. Private members are ignored; symmetric (`oct`) keys refused.
    public init(json: JSONObject) throws(JWKError) {
        guard let kty = json["kty"]?.stringValue else { throw JWKError("JWK without a kty string") }
        func string(_ name: String) throws(JWKError) -> String? {
            guard let value = json[name] else { return nil }
            guard let text = value.stringValue else { throw JWKError("JWK member '\(name)' is not a string") }
            return text
        }
        func bytes(_ name: String) throws(JWKError) -> [UInt8] {
            guard let text = try string(name), let decoded = Base64URL.decode(text), !decoded.isEmpty else {
                throw JWKError("JWK member '\(name)' missing or not base64url")
            }
            return decoded
        }
        keyID = try string("kid")
        keyType = kty
        algorithm = try string("alg").map(JWSAlgorithm.init(rawValue:))
        use = try string("use")
        if let ops = json["key_ops"] {
            guard let array = ops.arrayValue else { throw JWKError("JWK key_ops is not an array") }
            keyOperations = array.compactMap(\.stringValue)
        } else {
            keyOperations = nil
        }
        do {
            switch kty {
            case "RSA":
                // Some encoders prepend a zero byte to n; Base64urlUInt is minimal (RFC 7518 §6.3.1.1).
                let modulus = Array(try bytes("n").drop { $0 == 0 })
                let exponent = try bytes("e")
                if let refusal = RSAKeyCheck.refusal(modulus: modulus, exponent: exponent) { throw JWKError(refusal) }
                key = try PublicKey(rsaModulus: modulus, exponent: exponent)
            case "EC":
                guard let curve = try string("crv") else { throw JWKError("EC JWK without crv") }
                let x = try bytes("x"), y = try bytes("y")
                let size = ["P-256": 32, "P-384": 48, "P-521": 66][curve]
                guard let size else { throw JWKError("unsupported EC crv") }
                // RFC 7518 §6.2.1.2: full-length coordinates, even with leading zeros.
                guard x.count == size, y.count == size else { throw JWKError("EC coordinates of the wrong length") }
                key = try PublicKey(ecCurve: curve, x: x, y: y)
            case "OKP":
                guard try string("crv") == "Ed25519" else { throw JWKError("only OKP crv Ed25519 is supported") }
                key = try PublicKey(ed25519: try bytes("x"))
            default:
                throw JWKError("unsupported kty '\(Printable.safe(kty, maxBytes: 32))'")
            }
        } catch let error as JWKError {
            throw error
        } catch {
            throw JWKError("key import failed: \(error)")
        }
    }

    /// Why this key may not verify a token with `algorithm`, or nil when it may
    /// (RFC 8725 §3.1: the key's type, curve and pinned `alg` must all agree with the header).
    public func refusal(for algorithm: JWSAlgorithm) -> String? {
        if let pinned = self.algorithm, pinned != algorithm {
            return "the key is for \(Printable.safe(pinned.rawValue, maxBytes: 32)), the token says \(algorithm)"
        }
        if let use, use != "sig" { return "the key's use is not 'sig'" }
        if let keyOperations, !keyOperations.contains("verify") { return "the key's key_ops exclude 'verify'" }
        guard key.fits(algorithm) else { return "a \(key.kind) key cannot verify \(algorithm)" }
        return key.weakness
    }
}

extension PublicKey {
    /// Why this key is too weak to sign or verify anything, or nil: an RSA key under 2048 bits
    /// (RFC 7518 §3.3). Keys risc signs with (a service account's, the unlink-notice keys, a
    /// transmitter client's) are checked when loaded, as keys it verifies with are when used.
    public var weakness: String? {
        if case .rsa(let bits) = kind, bits < 2048 { return "RSA key of \(bits) bits is under the 2048-bit minimum (RFC 7518 §3.3)" }
        return nil
    }

    /// This key as a public JWK object.
    public func jwk(keyID: String?, algorithm: JWSAlgorithm?) -> JSONObject {
        var object = JSONObject()
        func param(_ name: String, octets: Bool) -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 1024)
            let length =
                octets
                ? risc_ossl_get_octets(pointer, name, &buffer, buffer.count)
                : risc_ossl_get_bn(pointer, name, &buffer, buffer.count)
            return length > 0 ? Array(buffer.prefix(Int(length))) : []
        }
        switch kind {
        case .rsa:
            object["kty"] = "RSA"
            object["n"] = .string(Base64URL.encode(param("n", octets: false)))
            object["e"] = .string(Base64URL.encode(param("e", octets: false)))
        case .ec(let curve):
            let point = param("pub", octets: true)  // 04 ‖ x ‖ y
            let size = (point.count - 1) / 2
            object["kty"] = "EC"
            object["crv"] = .string(curve)
            object["x"] = .string(Base64URL.encode(point.dropFirst().prefix(size)))
            object["y"] = .string(Base64URL.encode(point.suffix(size)))
        case .ed25519:
            var raw = [UInt8](repeating: 0, count: 32)
            var length = 32
            EVP_PKEY_get_raw_public_key(pointer, &raw, &length)
            object["kty"] = "OKP"
            object["crv"] = "Ed25519"
            object["x"] = .string(Base64URL.encode(raw.prefix(length)))
        }
        if let keyID { object["kid"] = .string(keyID) }
        if let algorithm { object["alg"] = .string(algorithm.rawValue) }
        object["use"] = "sig"
        return object
    }
}
