import ArgumentParser
import Foundation
import RISCCore
import RISCStore
import RISCTestKit

extension RiscCommand {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make signing keys for testing (never for production: Google signs real events), and the token-fingerprint key.",
            subcommands: [Generate.self, TokenKeyCommand.self]
        )
    }
}

extension RiscCommand.Keys {
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a private key (<kid>.pem, mode 0600) and add its public key to DIR/jwks.json."
        )

        @Option(help: "Directory for the key files.")
        var dir: String

        @Option(help: "Algorithm: RS256, ES256, Ed25519 (or any other supported JWS algorithm).")
        var alg: String = "RS256"

        @Option(help: "Key ID; random when omitted.")
        var kid: String?

        func validate() throws {
            let algorithm = JWSAlgorithm(rawValue: alg == "Ed25519" ? "EdDSA" : alg)
            guard algorithm.family != nil else {
                throw ValidationError("unsupported --alg \(alg); use RS256, ES256 or Ed25519")
            }
        }

        func run() async throws {
            let algorithm = JWSAlgorithm(rawValue: alg == "Ed25519" ? "EdDSA" : alg)
            let directory = URL(fileURLWithPath: dir)
            let entry = try KeyDirectory.generate(into: directory, algorithm: algorithm, keyID: kid)
            print("wrote \(directory.appendingPathComponent("\(entry.keyID).pem").path) (private, mode 0600)")
            print("updated \(directory.appendingPathComponent("jwks.json").path) (kid \(entry.keyID), alg \(algorithm))")
        }
    }
}

extension RiscCommand.Keys {
    struct TokenKeyCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token-key",
            abstract: "Write a new token-fingerprint key (32 random bytes, mode 0600) for accounts.token_key_file.",
            discussion: """
                risc stores linked and Google tokens only as fingerprints made with this key, and records a check \
                value of the key in the store: keep the file with the store's backups (or wherever the setting \
                points), since a store refuses to open with another key or none. An existing file is never overwritten.
                """
        )

        @Option(help: "Where to write the key.")
        var out: String

        func run() async throws {
            do { _ = try TokenKey.create(at: out) } catch let error as TokenKey.Refused {
                FileHandle.standardError.write(Data("risc keys token-key: \(error)\n".utf8))
                throw ExitCode(64)
            }
            print("wrote \(out) (token key, \(TokenKey.length) bytes, mode 0600); set accounts.token_key_file to it")
        }
    }
}
