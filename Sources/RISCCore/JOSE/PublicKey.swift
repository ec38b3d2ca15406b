import CRiscOpenSSL
import Synchronization

/// A public verification key held by OpenSSL (an `EVP_PKEY`).
///
/// Built only through the checked initialisers: RSA from modulus and exponent, EC from a point
/// that is validated to lie on its curve (RFC 8725 §3.4), Ed25519 from its 32 raw bytes.
/// Verification reuses prepared `EVP_PKEY_CTX`s from a small pool per algorithm, because
/// preparing a context in OpenSSL 3 costs a provider fetch comparable to the RSA operation.
public final class PublicKey: @unchecked Sendable {  // reason: the EVP_PKEY is never changed after init (OpenSSL allows concurrent use); contexts go through `pool`
    /// What kind of key this is, as JOSE names it.
    public enum Kind: Sendable, Equatable, CustomStringConvertible {
        case rsa(bits: Int)
        /// `curve` is the JWK `crv` (`P-256`, `P-384`, `P-521`).
        case ec(curve: String)
        case ed25519

        public var description: String {
            switch self {
            case .rsa(let bits): "RSA-\(bits)"
            case .ec(let curve): "EC \(curve)"
            case .ed25519: "Ed25519"
            }
        }
    }

    let pointer: OpaquePointer
    public let kind: Kind
    private let pool = Mutex<[JWSAlgorithm: [Context]]>([:])

    /// A prepared `EVP_PKEY_CTX`, used by one thread at a time (taken from and returned to the pool).
    private struct Context: @unchecked Sendable {  // reason: owned by one thread at a time, between taking and returning it
        let pointer: OpaquePointer
        func free() { EVP_PKEY_CTX_free(pointer) }
    }

    /// Takes ownership of an `EVP_PKEY`.
    init(owning pointer: OpaquePointer) throws(OpenSSLError) {
        self.pointer = pointer
        if risc_ossl_is_rsa(pointer) == 1 {
            kind = .rsa(bits: Int(EVP_PKEY_get_bits(pointer)))
        } else if risc_ossl_is_ec(pointer) == 1 {
            var name = [CChar](repeating: 0, count: 64)
            guard risc_ossl_get_group(pointer, &name, name.count) == 1 else {
                EVP_PKEY_free(pointer)
                throw OpenSSLError(operation: "EC key without a group", detail: "")
            }
            let group = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            let curves = ["prime256v1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"]
            guard let curve = curves[group] else {
                EVP_PKEY_free(pointer)
                throw OpenSSLError(operation: "unsupported EC group", detail: group)
            }
            kind = .ec(curve: curve)
        } else if risc_ossl_is_ed25519(pointer) == 1 {
            kind = .ed25519
        } else {
            EVP_PKEY_free(pointer)
            throw OpenSSLError(operation: "unsupported key type", detail: "")
        }
    }

    deinit {
        pool.withLock { pool in
            for contexts in pool.values { for context in contexts { context.free() } }
        }
        EVP_PKEY_free(pointer)
    }

    /// An RSA public key from big-endian modulus and public exponent.
    public convenience init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws(OpenSSLError) {
        guard let key = risc_ossl_rsa_public(modulus, modulus.count, exponent, exponent.count) else {
            throw OpenSSLError.capture("RSA public key import")
        }
        try self.init(owning: key)
    }

    /// An EC public key; the point must lie on the named curve.
    public convenience init(ecCurve curve: String, x: [UInt8], y: [UInt8]) throws(OpenSSLError) {
        guard let key = risc_ossl_ec_public(curve, x, x.count, y, y.count) else {
            throw OpenSSLError.capture("EC public key import (\(curve))")
        }
        try self.init(owning: key)
    }

    /// An Ed25519 public key from its 32 raw bytes (RFC 8037 `x`).
    public convenience init(ed25519 raw: [UInt8]) throws(OpenSSLError) {
        guard raw.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, raw, raw.count) else {
            throw OpenSSLError.capture("Ed25519 public key import")
        }
        try self.init(owning: key)
    }

    /// Whether this key's type fits the algorithm (RFC 8725 §3.1: one key, one algorithm family).
    public func fits(_ algorithm: JWSAlgorithm) -> Bool {
        switch (algorithm.family, kind) {
        case (.rsaPKCS1, .rsa), (.rsaPSS, .rsa), (.eddsa, .ed25519): true
        case (.ecdsa(_, let wanted, _), .ec(let curve)): wanted == curve
        default: false
        }
    }

    /// Verifies `signature` over `message`. The caller has checked that the key fits `algorithm`.
    public func verify(signature: [UInt8], message: ArraySlice<UInt8>, algorithm: JWSAlgorithm) -> Bool {
        guard let family = algorithm.family else { return false }
        var signature = signature
        switch family {
        case .eddsa:
            return verifyOneShot(signature: signature, message: Array(message))
        case .ecdsa(_, _, let size):
            // JWS carries raw r‖s (RFC 7518 §3.4), OpenSSL wants DER.
            guard signature.count == 2 * size, let der = Self.ecdsaDER(fromRaw: signature) else { return false }
            signature = der
            fallthrough
        case .rsaPKCS1, .rsaPSS:
            guard let context = takeContext(for: algorithm, family: family) else { return false }
            defer { returnContext(context, for: algorithm) }
            let bits = (family.digest ?? .sha256).bits
            var digest: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &digest) { digestBuffer in
                // Hashed on the stack (an EVP digest context allocates at every init in OpenSSL 3.0).
                let length = message.withUnsafeBytes { bytes in
                    risc_ossl_sha2(bits, bytes.baseAddress, bytes.count, digestBuffer.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
                guard length > 0 else { return false }
                let result = EVP_PKEY_verify(context.pointer, signature, signature.count, digestBuffer.baseAddress, Int(length))
                if result != 1 { ERR_clear_error() }
                return result == 1
            }
        }
    }

    private func verifyOneShot(signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit_ex(context, nil, nil, nil, nil, pointer, nil) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = EVP_DigestVerify(context, signature, signature.count, message, message.count)
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    private func takeContext(for algorithm: JWSAlgorithm, family: JWSAlgorithm.Family) -> Context? {
        // Through `values[index]`: `$0[algorithm]?.popLast()` moved the array out and back in,
        // two allocations for every verification.
        let pooled = pool.withLock { pool -> Context? in
            guard let index = pool.index(forKey: algorithm) else { return nil }
            return pool.values[index].popLast()
        }
        if let pooled { return pooled }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { return nil }
        var ok = EVP_PKEY_verify_init(context) == 1
        switch family {
        case .rsaPKCS1:
            ok = ok && EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        case .rsaPSS:
            // RFC 7518 §3.5: MGF1 with the same hash, salt length equal to the hash size.
            ok =
                ok && EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, RSA_PSS_SALTLEN_DIGEST) == 1
        default: break
        }
        ok = ok && EVP_PKEY_CTX_set_signature_md(context, OpenSSLDigests.shared.named(family.digest ?? .sha256)) == 1
        guard ok else {
            ERR_clear_error()
            EVP_PKEY_CTX_free(context)
            return nil
        }
        return Context(pointer: context)
    }

    private func returnContext(_ context: Context, for algorithm: JWSAlgorithm) {
        let kept = pool.withLock { pool -> Bool in
            guard pool[algorithm, default: []].count < 16 else { return false }
            pool[algorithm, default: []].append(context)
            return true
        }
        if !kept { context.free() }
    }

    static func ecdsaDER(fromRaw raw: [UInt8]) -> [UInt8]? {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = risc_ossl_ecdsa_raw_to_der(raw, raw.count, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
