import CRiscOpenSSL

/// Message digests fetched once from the default provider: an implicit fetch on every
/// verification costs more than the hash itself.
struct OpenSSLDigests: @unchecked Sendable {  // reason: EVP_MDs fetched once, never changed, shareable across threads
    let sha256: OpaquePointer
    let sha384: OpaquePointer
    let sha512: OpaquePointer

    static let shared = OpenSSLDigests(
        sha256: EVP_MD_fetch(nil, "SHA256", nil)!,
        sha384: EVP_MD_fetch(nil, "SHA384", nil)!,
        sha512: EVP_MD_fetch(nil, "SHA512", nil)!
    )

    func named(_ digest: JWSAlgorithm.Digest) -> OpaquePointer {
        switch digest {
        case .sha256: sha256
        case .sha384: sha384
        case .sha512: sha512
        }
    }

    /// SHA-2 of `bytes`, hashed on the stack (`risc_ossl_sha2`): an EVP digest context of OpenSSL
    /// 3.0 allocates at every init.
    static func sha2(_ digest: JWSAlgorithm.Digest, _ bytes: some Collection<UInt8>) -> [UInt8] {
        let hash = { (input: UnsafeRawBufferPointer) in
            [UInt8](unsafeUninitializedCapacity: 64) { output, initialized in
                initialized = Int(risc_ossl_sha2(digest.bits, input.baseAddress, input.count, output.baseAddress))
            }
        }
        return bytes.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0)) } ?? Array(bytes).withUnsafeBytes(hash)
    }
}

extension JWSAlgorithm.Digest {
    /// The digest's size in bits, as `risc_ossl_sha2` takes it.
    var bits: Int32 {
        switch self {
        case .sha256: 256
        case .sha384: 384
        case .sha512: 512
        }
    }
}

/// SHA-512, for Google's `hash_base64_sha512_sha512` token identifiers.
public enum SHA512 {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        OpenSSLDigests.sha2(.sha512, bytes)
    }

    /// `base64(SHA512(SHA512(utf8(token))))`, standard alphabet with padding (spec §1.9).
    public static func doubleHashBase64(_ token: String) -> String {
        Base64URL.encodeStandard(hash(hash(Array(token.utf8))))
    }

    /// `base64(SHA512(hex(SHA512(utf8(token)))))`, the inner digest as lowercase hex: the other
    /// reading of `hash_base64_sha512_sha512` (spec §9 question 5 leaves open which Google sends).
    public static func doubleHashOfHexBase64(_ token: String) -> String {
        Base64URL.encodeStandard(hash(Array(hash(Array(token.utf8)).lowercaseHex.utf8)))
    }
}

/// SHA-256 (webhook idempotency keys, the event log's chain and checkpoints), hashed on the
/// stack: no context allocated for each hash.
public enum SHA256 {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] { OpenSSLDigests.sha2(.sha256, bytes) }

    /// `SHA-256(prefix ‖ bytes)` written into `output` (32 bytes), with no copy of the input (the
    /// event log's chain hashes every line behind a `0x00`).
    public static func hash(prefix: UInt8, _ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= 32)
        var prefix = prefix
        risc_ossl_sha256(&prefix, 1, bytes.baseAddress, bytes.count, output.baseAddress?.assumingMemoryBound(to: UInt8.self))
    }

    /// The digest in lower-case hex.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        hash(bytes).lowercaseHex
    }
}
