/// Strict base64url (RFC 4648 §5) without padding, as JWS requires (RFC 7515 §2).
///
/// A table decoder over bytes: Foundation's base64 was measured on this machine at ~32 µs per
/// token, more than the RSA verification itself. Padding (`=`), the standard alphabet (`+`, `/`),
/// whitespace, an impossible length, and non-zero trailing bits are all rejected, so each byte
/// string has exactly one accepted encoding.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Decodes `input`, or returns nil when it is not canonical unpadded base64url.
    public static func decode(_ input: some Collection<UInt8>) -> [UInt8]? {
        if let result = input.withContiguousStorageIfAvailable({ decode(buffer: $0) }) { return result }
        return Array(input).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    /// The decoder proper: four characters to three bytes at a time, then the tail.
    static func decode(buffer input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = input.count
        let remainder = count % 4
        if remainder == 1 { return nil }
        let outputCount = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        guard let source = input.baseAddress else { return [] }
        return decodeTable.withUnsafeBufferPointer { tableBuffer -> [UInt8]? in
            let table = tableBuffer.baseAddress!
            var bad: UInt8 = 0
            let output = [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                var src = source
                var dst = out.baseAddress!
                let end = source + (count - remainder)
                while src < end {
                    let a = table[Int(src[0])], b = table[Int(src[1])], c = table[Int(src[2])], d = table[Int(src[3])]
                    bad |= a | b | c | d
                    dst[0] = a << 2 | b >> 4
                    dst[1] = b << 4 | c >> 2
                    dst[2] = c << 6 | d
                    src += 4
                    dst += 3
                }
                if remainder >= 2 {
                    let a = table[Int(src[0])], b = table[Int(src[1])]
                    bad |= a | b
                    dst[0] = a << 2 | b >> 4
                    if remainder == 3 {
                        let c = table[Int(src[2])]
                        bad |= c
                        dst[1] = b << 4 | c >> 2
                        // Canonical: the two unused bits must be zero.
                        if c & 0x03 != 0 { bad |= 0x80 }
                    } else if b & 0x0F != 0 {
                        bad |= 0x80  // four unused bits must be zero
                    }
                }
                initialized = outputCount
            }
            // Table misses are 0xFF; valid values are below 64, so any miss sets bit 7.
            return bad & 0x80 == 0 ? output : nil
        }
    }

    /// Decodes a string; nil when it is not canonical unpadded base64url.
    public static func decode(_ string: String) -> [UInt8]? {
        decode(Array(string.utf8))
    }

    /// Encodes bytes as unpadded base64url.
    public static func encode(_ input: some Collection<UInt8>) -> String {
        var output = [UInt8]()
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
            accumulator &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)]) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Standard base64 with padding (RFC 4648 §4), as Google's `hash_base64_sha512_sha512` uses.
    public static func encodeStandard(_ input: some Collection<UInt8>) -> String {
        var text = encode(input)
        text = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while text.utf8.count % 4 != 0 { text.append("=") }
        return text
    }

    /// Normalises either alphabet, padded or not, to unpadded base64url; nil if not base64 at all.
    public static func normalize(_ text: String) -> String? {
        var bytes = Array(text.utf8)
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for index in bytes.indices {
            if bytes[index] == UInt8(ascii: "+") { bytes[index] = UInt8(ascii: "-") } else if bytes[index] == UInt8(ascii: "/") { bytes[index] = UInt8(ascii: "_") }
        }
        guard let decoded = decode(bytes) else { return nil }
        return encode(decoded)
    }
}
