import RISCCore
import Testing

/// SHA-2 as risc hashes on the stack (the event log's chain, checkpoints, webhook keys).
@Suite("SHA-2")
struct DigestTests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }

    @Test("FIPS 180-2's answers; the prefixed hash agrees with the plain one, over any collection")
    func knownAnswers() {
        #expect(Self.hex(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Self.hex(SHA512.hash(Array("abc".utf8)))
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(Self.hex(SHA256.hash(long)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // A collection without contiguous storage hashes as its bytes do.
        #expect(SHA256.hash(long.lazy.map { $0 }) == SHA256.hash(long))
        #expect(SHA256.hash(long[3...]) == SHA256.hash(Array(long[3...])))
        var output = [UInt8](repeating: 0, count: 32)
        long.withUnsafeBytes { bytes in output.withUnsafeMutableBytes { SHA256.hash(prefix: 0x00, bytes, into: $0) } }
        #expect(output == SHA256.hash([0x00] + long))
    }
}
