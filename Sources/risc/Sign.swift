import ArgumentParser
import Foundation
import RISCCore
import RISCTestKit

extension RiscCommand {
    struct Sign: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a signed Security Event Token made with a test key."
        )

        @Option(help: "Event type: a short name (sessions-revoked, tokens-revoked, token-revoked, account-disabled, account-enabled, account-credential-change-required, verification) or a full URI.")
        var type: String = "sessions-revoked"

        @Option(help: "The Google account ID (sub) the event is about.")
        var subject: String = "7375626A656374"

        @Option(help: "File holding a refresh token, for token-revoked (only its prefix or hash is put in the SET).", transform: OptionRange.path)
        var tokenFile: String?

        @Option(help: "How token-revoked names the token: prefix or hash.")
        var tokenAlg: String = "hash"

        @Option(help: "account-disabled reason (hijacking, bulk-account).")
        var reason: String?

        @Option(help: "verification state.")
        var state: String?

        @Option(help: "Audience (client ID).")
        var aud: String = SETFactory.defaultAudience

        @Option(help: "Issuer.")
        var iss: String = SETFactory.defaultIssuer

        @Option(help: "Token ID; random when omitted.")
        var jti: String?

        @Option(help: "Issued-at, seconds since the epoch; now when omitted.")
        var iat: Double?

        func validate() throws {
            if let iat, !iat.isFinite { throw ValidationError("--iat must be a number of seconds since the epoch, got \(iat)") }
        }

        @Option(help: "Key directory (as `risc keys generate` writes it).", transform: OptionRange.path)
        var keys: String = "keys/test"

        @Option(help: "Key ID within the key directory; the first key when omitted.")
        var kid: String?

        @Option(help: "Make a token a receiver must refuse instead (see --list).")
        var negative: String?

        @Flag(help: "List the --negative kinds with the answer a receiver should give.")
        var list = false

        func run() async throws {
            if list {
                for kind in NegativeTokens.kinds { print("\(kind.name.padded(20)) \(kind.expected.padded(27)) \(kind.summary)") }
                return
            }
            guard let eventType = EventType(name: type) else { throw ValidationError("unknown event type \(type)") }
            let directory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            guard let entry = kid.map({ directory.entry(keyID: $0) }) ?? directory.entries.first else {
                throw ValidationError("no key \(kid ?? "") in \(keys)")
            }
            let factory = SETFactory(issuer: iss, audience: aud, signer: entry.signer)
            if let negative {
                guard let token = try NegativeTokens.make(negative, factory: factory) else {
                    throw ValidationError("unknown --negative \(negative); see --list")
                }
                print(token)
                return
            }
            var subjectValue: JSONValue? = factory.accountSubject(subject)
            if eventType.canonical == .verification {
                subjectValue = nil  // Google's verification event carries its state only (spec §1.8)
            } else if eventType.canonical == .tokenRevoked {
                guard let tokenFile else { throw ValidationError("token-revoked needs --token-file with the refresh token") }
                let algorithm: OAuthTokenIdentifier.Algorithm = tokenAlg == "prefix" ? .prefix : .hashSHA512SHA512
                subjectValue = SETFactory.tokenSubject(refreshToken: try readToken(tokenFile, what: "--token-file"), algorithm: algorithm)
            }
            var extra = JSONObject()
            if let reason { extra["reason"] = .string(reason) }
            if let state { extra["state"] = .string(state) }
            print(try factory.make(type: eventType, subject: subjectValue, extra: extra, jti: jti, iat: iat))
        }
    }
}
