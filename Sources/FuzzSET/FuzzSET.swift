// libFuzzer target for what arrives over the network: the SET path (compact JWS parsing, the
// algorithm allow-list, signature checking, SET claims and policy, action planning), the JSON
// parser's round trip, the RFC 7009 revocation endpoint's request (form body, Basic credentials)
// and the App Flip link Google opens.
// Built by scripts/fuzz with -sanitize=fuzzer and -DFUZZING (libFuzzer supplies main); built
// normally, it is a runner that feeds files (the kept crash inputs) through the same function.
import Foundation
import FuzzSupport
import RISCCore

enum Target {
    static let key = try! PrivateKey.generate(.rsa(bits: 2048))
    static let resolved = ResolvedKey(key: JWK(keyID: "fuzz", algorithm: .rs256, key: key.publicKey), issuer: "https://accounts.google.com")
    static let policy = SETPolicy(audiences: ["fuzz-client"], algorithms: [.rs256, .es256, .eddsa, .ps256])
    static let revocation = RevocationPolicy(clientID: "google", clientSecret: Array("fuzz-secret-0123456789".utf8))
    static let appFlip = AppFlipPolicy(clientID: "fuzz-client")
    static let header = try! CompactJWS(JWSSigner(key: key, algorithm: .rs256, keyID: "fuzz").sign(payload: Array("{}".utf8))).header

    /// The first byte picks what the rest is: a compact JWS, a SET payload, or any JSON.
    static func run(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let input = Array(bytes.dropFirst())
        switch mode % 5 {
        case 0:
            guard let jws = try? SETVerifier.parse(input, policy: policy) else { return }
            _ = try? SETVerifier.check(jws, key: resolved, policy: policy, now: 1_800_000_000)
        case 1:
            guard let token = try? SecurityEventToken(payload: input) else { return }
            _ = try? policy.validate(token, header: header, issuer: resolved.issuer, now: 1_800_000_000)
            _ = ActionPlan.plan(for: token, table: .default, now: 1_800_000_000)
        case 3:
            // The body, then after a NUL the Authorization field (Basic credentials) when there is one.
            let parts = input.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
            let authorization = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : nil
            guard let request = try? RevocationRequest.parse(body: Array(parts[0]), contentType: "application/x-www-form-urlencoded", authorization: authorization)
            else { return }
            _ = try? revocation.check(request)
        case 4:
            _ = AppFlip.check(String(decoding: input, as: UTF8.self), policy: appFlip, code: "fuzz-code")
        default:
            // Property: what the parser accepts serializes to text it parses back to the same value.
            guard let value = try? JSONParser.parse(input) else { return }
            let again = try! JSONParser.parse(Array(value.serialized.utf8))
            precondition(again == value, "JSON round trip changed the value")
        }
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput") public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { FuzzEntry.run(data, size, Target.run) }
#else
@main enum Runner { static func main() { FuzzEntry.replayFiles(Target.run) } }
#endif
