import CRiscOpenSSL

/// How risc keeps tokens: never in plain text, only what matching a `token-revoked` event needs,
/// computed once when the token is registered and indexed.
///
/// - `hash`: `base64(SHA-512(SHA-512(token)))`, standard alphabet with padding: Google's
///   `hash_base64_sha512_sha512` identifier, so an event matches by one index lookup.
/// - `hashOfHex`: the same with the inner digest as lowercase hex, the identifier's other reading
///   (spec §9 question 5): an event matches either.
/// - `prefixMAC`: HMAC-SHA-256 of the token's first 16 characters under a key of the data
///   directory, hex: matches a `prefix` identifier without storing the prefix itself.
public struct TokenFingerprint: Sendable, Equatable {
    public let hash: String
    public let hashOfHex: String
    public let prefixMAC: String

    public init(token: String, key: [UInt8]) {
        hash = SHA512.doubleHashBase64(token)
        hashOfHex = SHA512.doubleHashOfHexBase64(token)
        prefixMAC = Self.prefixMAC(String(token.prefix(16)), key: key)
    }

    /// HMAC-SHA-256(key, prefix), hex.
    public static func prefixMAC(_ prefix: String, key: [UInt8]) -> String {
        HMACSHA256.hex(key: key, data: Array(prefix.utf8))
    }

    /// A `hash_base64_sha512_sha512` identifier as the store keeps it: standard alphabet, padded
    /// (events may use either alphabet, padded or not). nil when it is not base64 of 64 bytes.
    public static func normalizedHash(_ identifier: String) -> String? {
        guard let canonical = Base64URL.normalize(identifier), let bytes = Base64URL.decode(canonical), bytes.count == 64
        else { return nil }
        return Base64URL.encodeStandard(bytes)
    }

    /// Constant-time string equality (for matched identifiers).
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        constantTimeEquals(Array(a.utf8), Array(b.utf8))
    }

    /// Constant-time byte equality (MACs, digests); unequal lengths are unequal at once.
    public static func constantTimeEquals(_ x: [UInt8], _ y: [UInt8]) -> Bool {
        guard x.count == y.count else { return false }
        return CRYPTO_memcmp(x, y, x.count) == 0
    }
}

extension Sequence<UInt8> {
    /// The bytes in lowercase hex, two digits each (digests, MACs, key IDs).
    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: text, as: UTF8.self)
    }
}

extension TokenFingerprint {
    /// What a store records of the token-fingerprint key: HMAC-SHA-256(key, a fixed text), which
    /// says nothing of the key but tells whether a key is the one the fingerprints were made with.
    public static func keyCheckValue(_ key: [UInt8]) -> String {
        HMACSHA256.hex(key: key, data: Array("risc token-key check v1".utf8))
    }
}

/// HMAC-SHA-256 with OpenSSL (token prefixes, webhook signatures).
public enum HMACSHA256 {
    public static func mac(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        _ = EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, key, key.count, data, data.count, &out, out.count, &length)
        return Array(out.prefix(length))
    }

    public static func hex(key: [UInt8], data: [UInt8]) -> String {
        mac(key: key, data: data).lowercaseHex
    }
}
