import Foundation
import RISCCore
import Testing

/// Project Wycheproof's JWS and JWK suites (`../shared/vectors/wycheproof`, copied into the
/// bundle), run at the JOSE layer: the JWK Set parser, `CompactJWS`, key selection by `kid` and
/// the signature verifier, with every algorithm risc supports allowed.
///
/// Where risc is stricter than a vector on purpose, the case is named here rather than the code
/// loosened: HMAC is never accepted (RFC 8725 §2.1: risc only holds public keys), and a JWK's
/// `alg` binds the key to that algorithm, so RFC 7520's figures 20 and 27, whose keys name
/// another algorithm than the token, are refused.
@Suite("Wycheproof JOSE vectors")
struct WycheproofTests {
    struct Case: Sendable, CustomStringConvertible {
        let suite: String
        let id: Int
        let comment: String
        let token: String
        let keys: JSONValue
        let result: String
        var description: String { "\(suite) #\(id) \(comment)" }
    }

    static func load(_ name: String) -> [Case] {
        let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Vectors/wycheproof")!
        let document = try! JSONParser.parseObject(Array(try! Data(contentsOf: url)))
        var cases: [Case] = []
        for group in document["testGroups"]!.arrayValue! {
            let group = group.objectValue!
            // The public key (or set) when given; else the private one, whose public members are read.
            let keys = group["public"] ?? group["private"]!
            for test in group["tests"]!.arrayValue! {
                let test = test.objectValue!
                cases.append(
                    Case(
                        suite: name, id: Int(test["tcId"]!.numberValue!), comment: test["comment"]?.stringValue ?? "",
                        token: test["jws"]!.stringValue!, keys: keys, result: test["result"]!.stringValue!))
            }
        }
        return cases
    }

    static let signatureCases = load("json_web_signature_test")
    static let keyCases = load("json_web_key_test")

    /// Valid cases risc refuses on purpose (see the suite's comment), by suite and tcId.
    static func stricterOnPurpose(_ c: Case) -> Bool {
        let object = c.keys.objectValue!
        let keys = object["keys"]?.arrayValue ?? [c.keys]
        if keys.allSatisfy({ $0.objectValue?["kty"]?.stringValue == "oct" }) { return true }  // HMAC: never accepted
        return c.suite == "json_web_signature_test" && c.comment.hasPrefix("Figure2")  // RFC 7520 figures 20 and 27: alg-bound keys
    }

    /// Verifies as risc does: parse the compact JWS, read the key set (a lone JWK is a set of one),
    /// select by `kid` (or the only key when the token names none), verify with the algorithm allowed.
    static func verify(_ c: Case) throws -> Bool {
        let jws = try CompactJWS(c.token)
        let object = c.keys.objectValue!
        let set = try JWKSet(json: Array(JSONValue.object(object["keys"] != nil ? object : ["keys": [c.keys]]).serialized.utf8))
        let candidates = jws.header.keyID.map { set.keys(for: $0) } ?? (set.keys.count == 1 ? set.keys : [])
        guard let resolved = ResolvedKey(candidates: candidates, issuer: "wycheproof") else { return false }
        _ = try SignatureVerifier.verify(jws, with: resolved.key(for: jws.header.algorithm), allowed: Set(JWSAlgorithm.supported))
        return true
    }

    @Test("JWS suite: valid cases verify, invalid ones are refused", arguments: signatureCases)
    func signature(_ c: Case) {
        check(c)
    }

    @Test("JWK suite: weak, malformed, mismatched and ambiguous keys are refused", arguments: keyCases)
    func key(_ c: Case) {
        check(c)
    }

    func check(_ c: Case) {
        let verified = (try? Self.verify(c)) ?? false
        switch c.result {
        case "valid" where Self.stricterOnPurpose(c): #expect(!verified, "risc refuses this on purpose")
        case "valid": #expect(verified)
        case "invalid": #expect(!verified)
        default: break  // "acceptable": either answer
        }
    }

    @Test("the suites are all there")
    func counts() {
        #expect(Self.signatureCases.count == 401)
        #expect(Self.keyCases.count == 26)
    }
}
