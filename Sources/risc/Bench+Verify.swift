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

        @Option(help: "Key directory with an RS256 key.")
        var keys: String = "keys/test"

        @Flag(help: "Skip the openssl speed comparison.")
        var noOpenssl = false

        func run() async throws {
            let directory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            guard let entry = directory.entry(for: .rs256) else { throw ValidationError("no RS256 key in \(keys)") }
            let factory = SETFactory(signer: entry.signer)
            // Distinct, realistic tokens: an account-disabled event per token.
            let tokens = try (0..<512).map { index in
                Array(try factory.make(
                    type: .accountDisabled, subject: factory.accountSubject("1000\(index)"),
                    extra: ["reason": "hijacking"]).utf8)
            }
            let provider = StaticKeyProvider(keys: try directory.jwks, issuer: SETFactory.defaultIssuer)
            let policy = SETPolicy(audiences: [SETFactory.defaultAudience])
            let now = Date().timeIntervalSince1970

            var count = 0
            var failures = 0
            let clock = ContinuousClock()
            let start = clock.now
            let deadline = start.advanced(by: .seconds(seconds))
            while clock.now < deadline {
                for token in tokens.prefix(64) {
                    do {
                        let jws = try SETVerifier.parse(token, policy: policy)
                        let key = try provider.key(for: jws.header.keyID ?? "")
                        _ = try SETVerifier.check(jws, key: key, policy: policy, now: now)
                    } catch { failures += 1 }
                    count += 1
                }
            }
            let elapsed = (clock.now - start).seconds
            let rate = Double(count) / elapsed
            print(String(format: "risc RS256 end-to-end (split, decode, verify, claims): %.0f verifications/s, %.2f µs each, %d failures",
                rate, 1e6 / rate, failures))
            guard !noOpenssl else { return }
            if let openssl = Self.opensslVerifyRate(seconds: Int(seconds.rounded(.up))) {
                print(String(format: "openssl speed rsa2048 verify:                         %.0f verifications/s", openssl))
                print(String(format: "ratio: %.1f %% of OpenSSL's raw verify rate (target ≥ 80 %%)", 100 * rate / openssl))
            } else {
                print("openssl speed: not available")
            }
        }

        static func opensslVerifyRate(seconds: Int) -> Double? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl", "speed", "-seconds", "\(seconds)", "rsa2048"]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            // "rsa 2048 bits 0.000243s 0.000016s   4107.4  61189.0"
            guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("rsa 2048") }),
                let last = line.split(separator: " ").last
            else { return nil }
            return Double(last)
        }
    }
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
