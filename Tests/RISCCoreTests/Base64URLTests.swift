import RISCCore
import Testing

@Suite("Base64URL")
struct Base64URLTests {
    @Test("round-trips every length")
    func roundTrip() {
        var bytes: [UInt8] = []
        for length in 0..<70 {
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("="))
            #expect(Base64URL.decode(encoded) == bytes)
            bytes.append(UInt8(truncatingIfNeeded: length &* 37 &+ 11))
        }
    }

    @Test(
        "RFC 4648 §10 test vectors",
        arguments: [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
        ])
    func knownValues(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test(
        "refuses padding, the standard alphabet, whitespace, bad lengths and non-zero trailing bits",
        arguments: ["Zg==", "Zm9v+A", "Zm9v/A", "Zm9 v", "Z", "Zm9vY", "Zh", "Zm9", "Zm\n9v", "Zm9v."])
    func refuses(_ input: String) {
        #expect(Base64URL.decode(input) == nil)
    }

    @Test("standard base64 with padding for token hashes")
    func standard() {
        #expect(Base64URL.encodeStandard([0xFB, 0xFF]) == "+/8=")
        #expect(Base64URL.normalize("+/8=") == "-_8")
        #expect(Base64URL.normalize("-_8") == "-_8")
        #expect(Base64URL.normalize("***") == nil)
    }
}
