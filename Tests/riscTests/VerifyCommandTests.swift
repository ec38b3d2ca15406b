import Foundation
import RISCCore
import RISCTestKit
import Testing

@Suite("risc verify, keys, sign (the built binary)")
struct VerifyCommandTests {
    static let audience = SETFactory.defaultAudience

    @Test("the README sample verifies and prints claims and events as JSON")
    func sample() async throws {
        let result = try await RiscBinary.run([
            "verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "keys/test/jwks.json", "--audience", Self.audience,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let output = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(output["claims"]?.objectValue?["jti"] == "sample-0001")
        let event = try #require(output["events"]?.arrayValue?.first?.objectValue)
        #expect(event["reason"] == "hijacking")
        #expect(event["subject"]?.objectValue?["sub"] == "7375626A656374")
    }

    @Test("a refused token prints the RFC 8935 error and exits 1; stdin works")
    func refused() async throws {
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let result = try await RiscBinary.run(["verify", "-", "--jwks-file", "keys/test/jwks.json", "--audience", "someone-else"], stdin: token)
        #expect(result.status == 1)
        let body = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(body["err"] == "invalid_audience")
        #expect(!result.stdout.contains(token.prefix(30)))
    }

    /// Found: a `--jwks-file` that is no JWK Set (the PEM private key beside it, given by mistake)
    /// was "JWKS is not a JSON object: invalid number at byte 1", exit 1, as if the token had been
    /// refused. It names the option and the file, says what it wanted, and exits 64 (a usage error),
    /// for `verify` and `replay --dry-run` alike.
    @Test("a --jwks-file that is no JWK Set is a usage error naming the file (exit 64), not a refused token (exit 1)")
    func jwksFileNotAKeySet() async throws {
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        for arguments in [["verify", "-", "--audience", Self.audience], ["replay", "-", "--dry-run"]] {
            let result = try await RiscBinary.run(arguments + ["--jwks-file", "keys/test/risc-test-rs256.pem"], stdin: token)
            #expect(result.status == 64, "\(arguments[0]): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("--jwks-file keys/test/risc-test-rs256.pem is not a JWK Set"), "\(arguments[0]): \(result.stderr)")
        }
    }

    /// Found: a file of several tokens (as `risc replay` takes) gave only `not a compact JWS:
    /// expected three dot-separated parts`, which does not say why. The RFC 8935 answer stays; a
    /// line on standard error says what the file holds and which command checks each.
    @Test("a file of several tokens is refused with a hint naming how many and replay --dry-run")
    func severalTokens() async throws {
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let result = try await RiscBinary.run(
            ["verify", "-", "--jwks-file", "keys/test/jwks.json", "--audience", SETFactory.defaultAudience], stdin: token + "\n" + token + "\n")
        #expect(result.status == 1 && result.stdout.contains("invalid_request"), "\(result.stdout)")
        #expect(result.stderr.contains("holds 2 tokens, one a line") && result.stderr.contains("risc replay"), "\(result.stderr)")
    }

    /// Found: `risc verify <(…)`, `risc replay <(risc sign …)` and `--jwks-file <(curl …)` said
    /// "cannot read /dev/fd/63": a pipe, `/dev/stdin` or a device was read as if it had to be a
    /// regular file; and a file that could not be read was named without the reason.
    @Test("a token file, a token list or --jwks-file may be a pipe (/dev/stdin, <(…)); one that cannot be read is named with the reason")
    func pipesAndReasons() async throws {
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let jwks = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/jwks.json"), encoding: .utf8)
        let verified = try await RiscBinary.run(
            ["verify", "/dev/stdin", "--jwks-file", "keys/test/jwks.json", "--audience", Self.audience], stdin: token)
        #expect(verified.status == 0, "\(verified.stderr)")
        let keysPiped = try await RiscBinary.run(
            ["verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "/dev/stdin", "--audience", Self.audience], stdin: jwks)
        #expect(keysPiped.status == 0, "\(keysPiped.stderr)")
        let replayed = try await RiscBinary.run(["replay", "/dev/stdin", "--dry-run", "--jwks-file", "keys/test/jwks.json", "--aud", Self.audience], stdin: token)
        #expect(replayed.status == 0, "\(replayed.stdout) \(replayed.stderr)")
        let replayKeys = try await RiscBinary.run(
            ["replay", "keys/test/sample-account-disabled.jwt", "--dry-run", "--jwks-file", "/dev/stdin", "--aud", Self.audience], stdin: jwks)
        #expect(replayKeys.status == 0, "\(replayKeys.stdout) \(replayKeys.stderr)")

        // A device that never ends is read only so far (it read until memory ran out).
        let endless = try await RiscBinary.run(["verify", "/dev/zero", "--jwks-file", "keys/test/jwks.json", "--audience", Self.audience])
        #expect(endless.status == 64 && endless.stderr.contains("cannot read /dev/zero: larger than 16 MiB"), "\(endless.stderr)")
        let missing = try await RiscBinary.run(["verify", "/nonexistent/token.jwt", "--jwks-file", "keys/test/jwks.json", "--audience", Self.audience])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("cannot read /nonexistent/token.jwt: No such file or directory"), "\(missing.stderr)")
        let directory = try await RiscBinary.run(["verify", "keys/test", "--jwks-file", "keys/test/jwks.json", "--audience", Self.audience])
        #expect(directory.status == 64)
        #expect(directory.stderr.contains("cannot read keys/test: Is a directory"), "\(directory.stderr)")
        let keysMissing = try await RiscBinary.run(["verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "/nonexistent/jwks.json", "--audience", Self.audience])
        #expect(keysMissing.stderr.contains("cannot read --jwks-file /nonexistent/jwks.json: No such file or directory"), "\(keysMissing.stderr)")
    }

    @Test("usage errors exit 64 with a message")
    func usage() async throws {
        let result = try await RiscBinary.run(["verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "keys/test/jwks.json"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--audience"))
        let hmac = try await RiscBinary.run(["verify", "-", "--jwks-file", "x", "--audience", "a", "--algorithm", "HS256"], stdin: "")
        #expect(hmac.status == 64)
        // Found: an issuer no SET can name (empty, with a space) was taken, and every token refused invalid_issuer.
        for (option, value) in [("--issuer", ""), ("--issuer", "https://accounts.google.com/ "), ("--issuer-alias", "a b")] {
            let result = try await RiscBinary.run(
                ["verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "keys/test/jwks.json", "--audience", "a", option, value])
            #expect(result.status == 64 && result.stderr.contains("\(option) must not be empty nor hold spaces"), "\(result.stderr)")
        }
    }

    @Test("verification through a discovery document, with the key set kept in the data directory")
    func discovery() async throws {
        let keys = try KeyDirectory.repositoryTestKeys()
        let issuer = try LocalIssuer(jwks: String(decoding: keys.jwksData, as: UTF8.self))
        defer { issuer.stop() }
        let factory = SETFactory(issuer: issuer.baseURL, signer: keys.entry(for: .rs256)!.signer)
        let token = try factory.make(type: .tokensRevoked, subject: factory.accountSubject("5"))
        let data = Scratch.root.appendingPathComponent("risc-cli-\(UUID().uuidString)")
        let arguments = ["verify", "-", "--discovery-url", issuer.discoveryURL, "--audience", Self.audience, "--data-dir", data.path]
        let result = try await RiscBinary.run(arguments, stdin: token)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("jwks-cache.json").path))
        // The issuer goes away: the persisted key set still verifies.
        issuer.update { $0.failWith = 503 }
        #expect(try await RiscBinary.run(arguments, stdin: token).status == 0)
        // No persisted copy and no issuer: a temporary failure, exit 3.
        let cold = try await RiscBinary.run(["verify", "-", "--discovery-url", issuer.discoveryURL, "--audience", Self.audience], stdin: token)
        #expect(cold.status == 3)
        #expect(cold.stderr.contains("temporary"))
    }

    @Test("keys generate writes a 0600 private key and a JWKS; sign makes tokens that verify", arguments: ["RS256", "ES256", "Ed25519"])
    func keysAndSign(alg: String) async throws {
        let directory = Scratch.root.appendingPathComponent("risc-keys-\(UUID().uuidString)")
        let generated = try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--alg", alg, "--kid", "k-\(alg)"])
        #expect(generated.status == 0, "\(generated.stderr)")
        let pem = directory.appendingPathComponent("k-\(alg).pem").path
        let mode = try FileManager.default.attributesOfItem(atPath: pem)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(!generated.stdout.contains("PRIVATE KEY"))
        let signed = try await RiscBinary.run(["sign", "--keys", directory.path, "--type", "account-disabled", "--reason", "bulk-account"])
        #expect(signed.status == 0, "\(signed.stderr)")
        let algorithm = alg == "Ed25519" ? "EdDSA" : alg
        let verified = try await RiscBinary.run(
            [
                "verify", "-", "--jwks-file", directory.appendingPathComponent("jwks.json").path, "--audience", Self.audience,
                "--algorithm", algorithm,
            ],
            stdin: signed.stdout)
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        #expect(verified.stdout.contains("bulk-account"))
    }

    /// Found: `keys generate --kid K` into a directory that already had K wrote a new private key
    /// over it and swapped its public key in jwks.json, without a word. In a notice key directory
    /// (docs/linking.md) K may be the signing key, whose old public key Google holds: every notice
    /// after it would be refused.
    @Test("keys generate never overwrites a key: a --kid already in the directory is refused (exit 64), the files untouched")
    func generateNeverOverwrites() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--kid", "k1"]).status == 0)
        let pem = directory.appendingPathComponent("k1.pem"), jwks = directory.appendingPathComponent("jwks.json")
        let (pemBefore, jwksBefore) = (try Data(contentsOf: pem), try Data(contentsOf: jwks))
        let again = try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--kid", "k1", "--alg", "ES256"])
        #expect(again.status == 64 && again.stderr.contains("key k1 exists in \(directory.path) already"), "\(again.stderr)")
        #expect(try Data(contentsOf: pem) == pemBefore && Data(contentsOf: jwks) == jwksBefore)
        // Published without its private key (retired elsewhere, or copied in): refused too.
        try FileManager.default.removeItem(at: pem)
        let published = try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--kid", "k1"])
        #expect(published.status == 64 && published.stderr.contains("key k1 exists"), "\(published.stderr)")
        #expect(!FileManager.default.fileExists(atPath: pem.path))
        #expect(try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--kid", "k2"]).status == 0)
        // A damaged jwks.json is named, and nothing is written beside it.
        try Data("[".utf8).write(to: jwks)
        let damaged = try await RiscBinary.run(["keys", "generate", "--dir", directory.path, "--kid", "k3"])
        #expect(damaged.status != 0 && damaged.stderr.contains("\(jwks.path) is not a JSON key set"), "\(damaged.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("k3.pem").path))
    }

    /// Found: `risc sign --type verification` put an account subject in the verification event,
    /// which Google's carries none of (spec §1.8: `state` only), so a developer's test token was
    /// not shaped as Google's (`risc replay`'s descriptions already left it out).
    @Test("sign --type verification makes Google's shape: the state, no subject")
    func verificationShape() async throws {
        let token = try await RiscBinary.run(["sign", "--type", "verification", "--state", "s-1"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let event = try #require(
            try SecurityEventToken(payload: CompactJWS(token).payload).claims["events"]?.objectValue?.first(where: { _ in true })?.value.objectValue)
        #expect(event == ["state": "s-1"], "\(event)")
    }

    @Test("sign token-revoked puts only the prefix or hash of the refresh token in the SET")
    func tokenRevoked() async throws {
        let file = Scratch.root.appendingPathComponent("risc-token-\(UUID().uuidString)")
        let refreshToken = "1//0gexample-refresh-token-for-tests"
        try Data(refreshToken.utf8).write(to: file)
        for (alg, expected) in [("prefix", "1//0gexample-ref"), ("hash", SHA512.doubleHashBase64(refreshToken))] {
            let signed = try await RiscBinary.run(["sign", "--type", "token-revoked", "--token-file", file.path, "--token-alg", alg])
            #expect(signed.status == 0, "\(signed.stderr)")
            let payload = try #require(Base64URL.decode(String(signed.stdout.split(separator: ".")[1])))
            let text = String(decoding: payload, as: UTF8.self)
            #expect(!text.contains(refreshToken))
            #expect(text.contains(expected.replacingOccurrences(of: "/", with: "\\/")) || text.contains(expected))
        }
    }
}
