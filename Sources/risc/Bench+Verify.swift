import ArgumentParser
import Foundation
import RISCCore
import RISCTestKit

extension RiscCommand.Bench {
    struct VerifyBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "RS256 end-to-end verifications per second on one core, next to `openssl speed rsa2048`.",
            discussion: "Build with -c release for meaningful figures: swift run -c release risc bench verify"
        )

        @Option(help: "Seconds to run each measurement.")
        var seconds: Double = 3

        @Option(help: "Key directory with an RS256 key.", transform: OptionRange.path)
        var keys: String = "keys/test"

        @Flag(help: "Skip the openssl speed comparison.")
        var noOpenssl = false

        func run() async throws {
            startBenchOrDrill()
            let directory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            guard let entry = directory.entry(for: .rs256) else { throw ValidationError("no RS256 key in \(keys)") }
            let factory = SETFactory(signer: entry.signer)
            // Distinct, realistic tokens: an account-disabled event per token, as Google shapes them.
            let tokens = try (0..<64).map { index in
                Array(
                    try factory.make(
                        type: .accountDisabled, subject: factory.accountSubject("1000\(index)"),
                        extra: ["reason": "hijacking"]
                    ).utf8)
            }
            let provider = StaticKeyProvider(keys: try directory.jwks, issuer: SETFactory.defaultIssuer)
            let policy = SETPolicy(audiences: [SETFactory.defaultAudience])
            let now = systemNow()

            var failures = 0
            let rate = Self.rate(seconds: seconds, batch: tokens.count) { index in
                do {
                    let jws = try SETVerifier.parse(tokens[index], policy: policy)
                    let key = try provider.key(for: jws.header.keyID ?? "")
                    _ = try SETVerifier.check(jws, key: key, policy: policy, now: now)
                } catch { failures += 1 }
            }
            print(
                String(
                    format: "risc RS256 end-to-end (split, decode, verify, claims): %.0f verifications/s, %.2f µs each, %d failures",
                    rate, 1e6 / rate, failures))

            // Where the time goes.
            let jws = try SETVerifier.parse(tokens[0], policy: policy)
            let key = try provider.key(for: jws.header.keyID ?? "").key.key
            let cryptoRate = Self.rate(seconds: min(1, seconds)) { _ in
                _ = key.verify(signature: jws.signature, message: jws.signingInput, algorithm: .rs256)
            }
            let parseRate = Self.rate(seconds: min(1, seconds)) { _ in _ = try? SETVerifier.parse(tokens[0], policy: policy) }
            let claimsRate = Self.rate(seconds: min(1, seconds)) { _ in _ = try? SecurityEventToken(payload: jws.payload) }
            print(
                String(
                    format: "  of which SHA-256 + RSA verify %.2f µs, split+decode+header %.2f µs, claims+events %.2f µs",
                    1e6 / cryptoRate, 1e6 / parseRate, 1e6 / claimsRate))

            guard !noOpenssl else { return }
            // This machine's speed drifts between runs, so OpenSSL is measured on both sides of a
            // second risc run, and each side is compared with the better of the two OpenSSL figures.
            guard let before = Self.opensslVerifyRate(seconds: Int(seconds.rounded(.up))) else {
                print("openssl speed: not available")
                return
            }
            let again = Self.rate(seconds: seconds, batch: tokens.count) { index in
                _ = try? SETVerifier.check(
                    try SETVerifier.parse(tokens[index], policy: policy), key: provider.key(for: entry.keyID),
                    policy: policy, now: now)
            }
            let after = Self.opensslVerifyRate(seconds: Int(seconds.rounded(.up))) ?? before
            let best = max(before, after), ours = max(rate, again)
            print(String(format: "openssl speed rsa2048 verify: %.0f and %.0f verifications/s; risc again: %.0f/s", before, after, again))
            print(String(format: "ratio: %.1f %% of OpenSSL's raw verify rate (best of each; target ≥ 80 %%)", 100 * ours / best))
        }

        /// Calls `body` with indexes 0..<batch, round after round, for `seconds`; returns calls per second.
        static func rate(seconds: Double, batch: Int = 256, _ body: (Int) -> Void) -> Double {
            let clock = ContinuousClock()
            let start = clock.now
            var count = 0
            while (clock.now - start).seconds < seconds {
                for index in 0..<batch { body(index) }
                count += batch
            }
            return Double(count) / (clock.now - start).seconds
        }

        static func opensslVerifyRate(seconds: Int) -> Double? {
            // "rsa 2048 bits 0.000243s 0.000016s   4107.4  61189.0"
            guard let output = runWithDefaultSignals(["openssl", "speed", "-seconds", "\(seconds)", "rsa2048"]),
                let line = output.split(separator: "\n").last(where: { $0.hasPrefix("rsa 2048") }),
                let last = line.split(separator: " ").last
            else { return nil }
            return Double(last)
        }
    }
}
