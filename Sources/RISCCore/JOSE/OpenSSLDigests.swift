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

    /// One-shot digest into a fixed buffer; returns the digest bytes.
    static func digest(_ md: OpaquePointer, _ message: UnsafeRawBufferPointer) -> [UInt8] {
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: Int(EVP_MAX_MD_SIZE)) { out, initialized in
            var length: UInt32 = 0
            failed = EVP_Digest(message.baseAddress, message.count, out.baseAddress, &length, md, nil) != 1
            initialized = failed ? 0 : Int(length)
        }
        return failed ? [] : output
    }
}

/// SHA-512, for Google's `hash_base64_sha512_sha512` token identifiers.
public enum SHA512 {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        Array(bytes).withUnsafeBytes { OpenSSLDigests.digest(OpenSSLDigests.shared.sha512, $0) }
    }

    /// `base64(SHA512(SHA512(utf8(token))))`, standard alphabet with padding (spec §1.9).
    public static func doubleHashBase64(_ token: String) -> String {
        Base64URL.encodeStandard(hash(hash(Array(token.utf8))))
    }
}

/// SHA-256 (webhook idempotency keys, the event log's chain and checkpoints), hashed on the
/// stack: no context allocated for each hash.
public enum SHA256 {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let hash = { (input: UnsafeRawBufferPointer) in
            [UInt8](unsafeUninitializedCapacity: 32) { output, initialized in
                risc_ossl_sha256(nil, 0, input.baseAddress, input.count, output.baseAddress)
                initialized = 32
            }
        }
        return bytes.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0)) } ?? Array(bytes).withUnsafeBytes(hash)
    }

    /// The digest in lower-case hex.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        hash(bytes).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

/// SHA-256 of many short inputs in a row, each behind a one-byte prefix (the event log's chain
/// hashes every line): no copy of the input, no allocation, per hash.
public final class SHA256Stream: Sendable {
    public init() {}

    /// `SHA-256(prefix ‖ bytes)` written into `output` (32 bytes).
    public func hash(prefix: UInt8, _ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= 32)
        var prefix = prefix
        risc_ossl_sha256(&prefix, 1, bytes.baseAddress, bytes.count, output.baseAddress?.assumingMemoryBound(to: UInt8.self))
    }
}
