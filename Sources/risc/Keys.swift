import ArgumentParser
import Foundation
import RISCCore
import RISCLocal
import RISCTestKit

extension RiscCommand {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Signing keys: test issuers' keys, the unlink-notice keys (rotate, activate, retire), the token-fingerprint key.",
            discussion: """
                A key directory holds <kid>.pem private keys (mode 0600) and jwks.json, the public keys. For a test issuer \
                (`risc sign`, replay) any key in it signs. For unlink notices (linking.notices.key_dir) the directory's \
                `active` file names the key that signs (the newest when absent) and the receiver publishes every key of \
                jwks.json: rotate without a refused notice by `generate` (published, not yet signing), waiting until Google \
                has fetched the JWKS again (the receiver serves it with a 5-minute max-age; a day is safer), `activate`, and \
                later `retire` the old key. `rotate` is generate and activate at once.
                """,
            subcommands: [Generate.self, Rotate.self, Activate.self, Retire.self, TokenKeyCommand.self, CheckpointKeyCommand.self]
        )
    }
}

extension RiscCommand.Keys {
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a private key (<kid>.pem, mode 0600) and add its public key to DIR/jwks.json."
        )

        @Option(help: "Directory for the key files.", transform: OptionRange.path)
        var dir: String

        @Option(help: "Algorithm: RS256, ES256, Ed25519 (or any other supported JWS algorithm).")
        var alg: String = "RS256"

        @Option(help: "Key ID; random when omitted.")
        var kid: String?

        func validate() throws {
            let algorithm = JWSAlgorithm(rawValue: alg == "Ed25519" ? "EdDSA" : alg)
            guard algorithm.family != nil else {
                throw ValidationError("unsupported --alg \(alg); use one of \(JWSAlgorithm.supported.map(\.rawValue).joined(separator: ", "))")
            }
        }

        func run() async throws {
            let algorithm = JWSAlgorithm(rawValue: alg == "Ed25519" ? "EdDSA" : alg)
            let directory = URL(fileURLWithPath: dir)
            let entry: KeyDirectory.Entry
            do { entry = try KeyDirectory.generate(into: directory, algorithm: algorithm, keyID: kid) } catch let error as KeyDirectory.KeyExists {
                throw ValidationError(error.description)
            } catch let error as KeyDirectory.LoadError {
                throw ValidationError(error.description)
            }
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

        @Option(help: "Where to write the key.", transform: OptionRange.path)
        var out: String

        func run() async throws {
            do { _ = try TokenKey.create(at: out) } catch let error as StoreError where error.code == .refused {
                FileHandle.standardError.write(Data("risc keys token-key: \(error)\n".utf8))
                throw ExitCode(64)
            }
            print("wrote \(out) (token key, \(TokenKey.length) bytes, mode 0600); set accounts.token_key_file to it")
        }
    }
}

extension RiscCommand.Keys {
    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate an unlink-notice key and make it the signing key (the old ones stay published)."
        )
        @Option(help: "The key directory (linking.notices.key_dir).", transform: OptionRange.path) var dir: String
        @Option(help: "Algorithm: RS256 (default; what Google's examples use), PS256, ES256 or EdDSA.") var alg: String = "RS256"

        func validate() throws {
            guard TransmitterKeys.algorithms.contains(JWSAlgorithm(rawValue: alg)) else {
                throw ValidationError("--alg must be RS256, PS256, ES256 or EdDSA")
            }
        }

        func run() async throws {
            try PrivateFiles.makeDirectory(dir)
            let entry = try KeyDirectory.generate(into: URL(fileURLWithPath: dir), algorithm: JWSAlgorithm(rawValue: alg))
            try TransmitterKeys.activate(directory: dir, keyID: entry.keyID)
            print("generated \(entry.keyID) (\(alg)) in \(dir); it signs unlink notices from now on, and the old keys stay published")
        }
    }

    struct Activate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a published unlink-notice key the signing key.")
        @Option(help: "The key directory (linking.notices.key_dir).", transform: OptionRange.path) var dir: String
        @Option(help: "The key's kid.") var kid: String

        func run() async throws {
            try keyChange { try TransmitterKeys.activate(directory: dir, keyID: kid) }
            print("\(kid) signs unlink notices from now on (a running receiver notices within a second)")
        }
    }

    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop publishing an unlink-notice key and delete its private key (never the signing key)."
        )
        @Option(help: "The key directory (linking.notices.key_dir).", transform: OptionRange.path) var dir: String
        @Option(help: "The key's kid.") var kid: String

        func run() async throws {
            try keyChange { try TransmitterKeys.retire(directory: dir, keyID: kid) }
            print("\(kid) is no longer published, and its private key is deleted")
        }
    }
}

/// Runs a change to a key directory; what is wrong with the directory or the kid is a usage error (exit 64).
private func keyChange(_ change: () throws -> Void) throws {
    do { try change() } catch let error as TransmitterKeys.LoadError { throw ValidationError(error.description) }
}

extension RiscCommand.Keys {
    struct CheckpointKeyCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "checkpoint-key",
            abstract: "Write a new Ed25519 key that signs the event log's checkpoints (mode 0600), and print its verifier key.",
            discussion: """
                Keep the key outside the data directory (event_log_checkpoint_key names it) and give the verifier key it \
                prints (also written to FILE.pub) to whoever audits the log: `risc log verify --key`.
                """
        )

        @Option(help: "The key file to write.", transform: OptionRange.path) var out: String
        @Option(help: "The key's name in the checkpoints' signature lines (one word).") var name: String = "risc-event-log"

        func run() throws {
            guard !FileManager.default.fileExists(atPath: out) else { throw SetupProblem("\(out) exists; risc does not overwrite a key") }
            let (key, file) = try CheckpointKey.generate(name: name)
            try PrivateFiles.writeAtomically(out, Array(file.utf8))
            try Data((key.verifierKey + "\n").utf8).write(to: URL(fileURLWithPath: out + ".pub"))
            print("wrote \(out) (private, mode 0600) and \(out).pub")
            print(key.verifierKey)
        }
    }
}
