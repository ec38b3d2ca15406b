import ArgumentParser
import Foundation
import RISCCore
import RISCTestKit

extension RiscCommand {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make signing keys for testing (never for production: Google signs real events).",
            subcommands: [Generate.self]
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
