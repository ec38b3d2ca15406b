/// Checks a JWS signature, with the algorithm rules of RFC 8725 §3.1 applied first.
public enum SignatureVerifier {
    /// Verifies `jws` with `key`.
    ///
    /// - The header's `alg` must be in `allowed`; `none` and HMAC are refused whatever
    ///   `allowed` holds (`invalid_request`).
    /// - The key must fit the algorithm: type and curve, the JWK's `alg` and `use` if present,
    ///   RSA of at least 2048 bits (`invalid_key`).
    /// - A signature that does not verify is `authentication_failed`.
    public static func verify(_ jws: CompactJWS, with key: JWK, allowed: Set<JWSAlgorithm>) throws(SETError) -> VerifiedJWS {
        try checkAlgorithm(jws.header.algorithm, allowed: allowed)
        return try verify(jws, with: key)
    }

    /// Verifies `jws` with `key` once `checkAlgorithm` has passed for its `alg`.
    static func verify(_ jws: CompactJWS, with key: JWK) throws(SETError) -> VerifiedJWS {
        if let refusal = key.refusal(for: jws.header.algorithm) {
            throw SETError(.invalidKey, "signing key refused: \(refusal)")
        }
        guard key.key.verify(signature: jws.signature, message: jws.signingInput, algorithm: jws.header.algorithm) else {
            throw SETError(.authenticationFailed, "signature does not verify")
        }
        return VerifiedJWS(jws)
    }

    /// The algorithm allow-list check alone, done before any key is looked up.
    public static func checkAlgorithm(_ algorithm: JWSAlgorithm, allowed: Set<JWSAlgorithm>) throws(SETError) {
        if algorithm.isForbidden {
            throw .invalidRequest("algorithm '\(Printable.safe(algorithm.rawValue, maxBytes: 32))' is never accepted (RFC 8725 §2.1)")
        }
        guard allowed.contains(algorithm), algorithm.family != nil else {
            throw .invalidRequest("algorithm '\(Printable.safe(algorithm.rawValue, maxBytes: 32))' is not allowed")
        }
    }
}
