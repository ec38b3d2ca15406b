import CRiscOpenSSL

/// A private signing key held by OpenSSL. Used by `risc sign`, the test kit and the
/// service-account JWT for Google's RISC API; the receiver itself never signs.
///
/// The key material never leaves OpenSSL except through `pemRepresentation`, which callers write
/// to a mode-0600 file. `description` names the key type only.
public final class PrivateKey: @unchecked Sendable, CustomStringConvertible {  // reason: the EVP_PKEY is never changed after init; each signature makes its own context
    let pointer: OpaquePointer
    /// The matching public key.
    public let publicKey: PublicKey

    private init(owning pointer: OpaquePointer) throws(OpenSSLError) {
        self.pointer = pointer
        guard EVP_PKEY_up_ref(pointer) == 1 else { throw OpenSSLError.capture("EVP_PKEY_up_ref") }
        self.publicKey = try PublicKey(owning: pointer)
    }

    deinit { EVP_PKEY_free(pointer) }

    public var description: String { "PrivateKey(\(publicKey.kind))" }

    /// Which kind of key to generate.
    public enum GenerationKind: Sendable {
        case rsa(bits: Int)
        case ec(curve: String)
        case ed25519
    }

    /// A new random key.
    public static func generate(_ kind: GenerationKind) throws(OpenSSLError) -> PrivateKey {
        let key: OpaquePointer?
        switch kind {
        case .rsa(let bits): key = risc_ossl_generate(1, UInt32(bits), nil)
        case .ec(let curve): key = risc_ossl_generate(2, 0, curve)
        case .ed25519: key = risc_ossl_generate(3, 0, nil)
        }
        guard let key else { throw OpenSSLError.capture("key generation") }
        return try PrivateKey(owning: key)
    }

    /// A key from PEM (PKCS#8 or traditional), as `risc keys generate` writes and Google's
    /// service-account JSON key files carry.
    public convenience init(pem: String) throws(OpenSSLError) {
        let bytes = Array(pem.utf8)
        guard let key = risc_ossl_read_private_pem(bytes, bytes.count) else {
            throw OpenSSLError.capture("private key PEM")
        }
        try self.init(owning: key)
    }

    /// A private key from a JWK object (RSA `d` with CRT members, EC `d`, OKP Ed25519 `d`).
    public convenience init(jwk: JSONObject) throws(JWKError) {
        func member(_ name: String) throws(JWKError) -> [UInt8] {
            guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw JWKError("private JWK member '\(name)' missing or not base64url")
            }
            return bytes
        }
        func optional(_ name: String) -> [UInt8] {
            jwk[name]?.stringValue.flatMap { Base64URL.decode($0) } ?? []
        }
        let pointer: OpaquePointer?
        switch jwk["kty"]?.stringValue {
        case "RSA":
            let n = try member("n"), e = try member("e"), d = try member("d")
            let p = optional("p"), q = optional("q"), dp = optional("dp"), dq = optional("dq"), qi = optional("qi")
            pointer = risc_ossl_rsa_private(
                n, n.count, e, e.count, d, d.count, p, p.count, q, q.count, dp, dp.count, dq, dq.count, qi, qi.count)
        case "EC":
            guard let curve = jwk["crv"]?.stringValue else { throw JWKError("EC JWK without crv") }
            let x = try member("x"), y = try member("y"), d = try member("d")
            pointer = risc_ossl_ec_private(curve, x, x.count, y, y.count, d, d.count)
        case "OKP":
            guard jwk["crv"]?.stringValue == "Ed25519" else { throw JWKError("only OKP crv Ed25519 is supported") }
            let d = try member("d")
            pointer = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, d, d.count)
        default:
            throw JWKError("unsupported private JWK kty")
        }
        guard let pointer else { throw JWKError("private key import failed: \(OpenSSLError.capture("import"))") }
        do { try self.init(owning: pointer) } catch { throw JWKError("private key import failed: \(error)") }
    }

    /// PKCS#8 PEM text. Write it only to a file with mode 0600.
    public var pemRepresentation: String {
        get throws(OpenSSLError) {
            var out: UnsafeMutablePointer<CChar>? = nil
            let length = risc_ossl_private_pem(pointer, &out)
            guard length > 0, let out else { throw OpenSSLError.capture("PEM export") }
            defer { CRYPTO_free(out, #fileID, #line) }
            return String(decoding: UnsafeRawBufferPointer(start: out, count: length), as: UTF8.self)
        }
    }

    /// Signs `message` as JWS `algorithm` prescribes; ECDSA output is raw r‖s.
    public func sign(_ message: some Collection<UInt8>, algorithm: JWSAlgorithm) throws(OpenSSLError) -> [UInt8] {
        guard let family = algorithm.family, publicKey.fits(algorithm) else {
            throw OpenSSLError(operation: "sign", detail: "key \(publicKey.kind) does not fit \(algorithm)")
        }
        let message = Array(message)
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLError.capture("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var pkeyContext: OpaquePointer? = nil
        let initialised =
            family.digest.map {
                EVP_DigestSignInit_ex(context, &pkeyContext, $0.rawValue, nil, nil, pointer, nil)
            } ?? EVP_DigestSignInit_ex(context, &pkeyContext, nil, nil, nil, pointer, nil)
        guard initialised == 1 else { throw OpenSSLError.capture("EVP_DigestSignInit_ex") }
        if case .rsaPSS = family {
            guard EVP_PKEY_CTX_set_rsa_padding(pkeyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(pkeyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else { throw OpenSSLError.capture("PSS parameters") }
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            throw OpenSSLError.capture("EVP_DigestSign (size)")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw OpenSSLError.capture("EVP_DigestSign")
        }
        signature.removeLast(signature.count - length)
        if case .ecdsa(_, _, let size) = family {
            var raw = [UInt8](repeating: 0, count: 2 * size)
            guard risc_ossl_ecdsa_der_to_raw(signature, signature.count, size, &raw) == 1 else {
                throw OpenSSLError.capture("ECDSA DER to raw")
            }
            return raw
        }
        return signature
    }
}
