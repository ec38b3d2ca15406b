import RISCCore
import RISCTestKit
import Testing

/// Random and mutated input never crashes the verifier and always ends in a typed rejection.
@Suite("Parser robustness")
struct RobustnessTests {
    /// SplitMix64: a seeded generator, so a failure reproduces.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func verifier() throws -> (SETVerifier, String) {
        let keys = try KeyDirectory.repositoryTestKeys()
        let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
        let token = try factory.make(type: .accountDisabled, subject: factory.accountSubject("1"), extra: ["reason": "hijacking"])
        let verifier = SETVerifier(
            policy: SETPolicy(audiences: [SETFactory.defaultAudience], algorithms: Set(JWSAlgorithm.supported)),
            keys: StaticKeyProvider(keys: try keys.jwks, issuer: SETFactory.defaultIssuer))
        return (verifier, token)
    }

    func expectTypedRejection(_ verifier: SETVerifier, _ bytes: [UInt8]) async {
        do {
            _ = try await verifier.verify(bytes, now: 1_800_000_000)
        } catch is SETError {
        } catch {
            Issue.record("untyped error \(error) for input of \(bytes.count) bytes")
        }
    }

    @Test("random bytes and random dotted base64url strings")
    func randomInput() async throws {
        let (verifier, _) = try Self.verifier()
        var rng = SeededGenerator(state: 0x5EED)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        for round in 0..<3_000 {
            let length = Int.random(in: 0..<300, using: &rng)
            let bytes: [UInt8] =
                round % 2 == 0
                ? (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
                : (0..<length).map { _ in alphabet.randomElement(using: &rng)! }
            await expectTypedRejection(verifier, bytes)
        }
    }

    @Test("mutations of a valid token: flips, truncations, insertions, segment swaps")
    func mutations() async throws {
        let (verifier, token) = try Self.verifier()
        let original = Array(token.utf8)
        var rng = SeededGenerator(state: 42)
        _ = try await verifier.verify(original, now: 1_800_000_000)
        for _ in 0..<3_000 {
            var bytes = original
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                let index = Int.random(in: 0..<bytes.count, using: &rng)
                bytes[index] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            case 1: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng)))
            case 2: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
            default:
                let a = Int.random(in: 0..<bytes.count, using: &rng), b = Int.random(in: 0..<bytes.count, using: &rng)
                bytes.removeSubrange(min(a, b)..<max(a, b))
            }
            do {
                _ = try await verifier.verify(bytes, now: 1_800_000_000)
                // Canonical base64url leaves no second spelling of a segment: only whitespace added
                // around the token (which is trimmed) or an empty change may still verify.
                let trimmed = bytes.drop { $0 <= 0x20 }.reversed().drop { $0 <= 0x20 }.reversed()
                #expect(Array(trimmed) == original, "a mutated token verified")
            } catch is SETError {
            } catch {
                Issue.record("untyped error \(error)")
            }
        }
    }

    @Test("hostile structure: deep nesting and huge member counts in the header")
    func hostileStructure() async throws {
        let (verifier, token) = try Self.verifier()
        let parts = token.split(separator: ".")
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let wide = "{" + (0..<5_000).map { "\"k\($0)\":0" }.joined(separator: ",") + ",\"alg\":\"RS256\"}"
        for header in [deep, wide, #"{"alg":"RS256","kid":"risc-test-rs256","alg":"none"}"#] {
            let mutated = "\(Base64URL.encode(Array(header.utf8))).\(parts[1]).\(parts[2])"
            await expectTypedRejection(verifier, Array(mutated.utf8))
        }
    }
}
