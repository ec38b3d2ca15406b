import ArgumentParser
import Foundation
import RISCCore

extension RiscCommand {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify one Security Event Token and print its claims and events as JSON.",
            discussion: """
                Prints the verified header, claims and parsed events. A token that is refused prints \
                {"err": CODE, "description": TEXT} (the RFC 8935 answer) and exits 1; a temporary \
                failure on our side (no usable key set) exits 3.
                """
        )

        @Argument(help: "File holding the compact token, or - for standard input.", transform: OptionRange.path)
        var file: String = "-"

        /// One token: far above any SET (a receiver takes at most 1 MiB, `push.max_body_bytes`).
        static let maxTokenBytes = 16 << 20

        @OptionGroup var verification: VerificationOptions
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let body = try readInput(file, limit: Self.maxTokenBytes)
            let verifier = SETVerifier(policy: verification.policy, keys: try verification.keyProvider(logger: global.makeLogger()))
            do {
                let validated = try await verifier.verify(body, now: systemNow())
                print(validated.json.prettyPrinted)
            } catch let error as SETError {
                print(error.responseBody)
                // A file of tokens, one a line (what `risc replay` takes): say so, beside the answer.
                let lines = nonEmptyLines(String(decoding: body, as: UTF8.self))
                if lines.count > 1 {
                    let source = file == "-" ? "standard input" : file
                    FileHandle.standardError.write(
                        Data("risc: \(source) holds \(lines.count) tokens, one a line; risc verify takes one; `risc replay FILE --dry-run` with the same key options checks each\n".utf8))
                }
                throw ExitStatus.rejected
            } catch let error as KeyUnavailableError {
                FileHandle.standardError.write(Data("risc: temporary failure: \(error)\n".utf8))
                throw ExitStatus.temporaryFailure
            }
        }
    }
}

/// Reads a whole file, or standard input for "-". Whatever can be read will do: a pipe
/// (`/dev/stdin`, a shell's `<(…)`) or a device as well as a file. One that cannot is named with
/// the reason, after `what` (an option's name) when given. Text: without a leading byte-order mark
/// (`FileContents.text`).
func readInput(_ path: String, what: String? = nil, limit: Int = FileContents.defaultLimit) throws -> [UInt8] {
    do { return FileContents.text(try path == "-" ? FileContents.readStandardInput(limit: limit) : FileContents.read(path, limit: limit)) } catch {
        throw ValidationError((what.map { "cannot read \($0) " } ?? "cannot read ") + "\(error.path): \(error.reason)")
    }
}

/// The JWK Set in `path` (an option's file, `what` its name): one that cannot be read, or is no
/// JWK Set (a PEM key given by mistake), is a usage error naming both.
func readJWKSet(_ path: String, what: String = "--jwks-file") throws -> JWKSet {
    let data = try readInput(path, what: what)
    do { return try JWKSet(json: data) } catch {
        throw ValidationError("\(what) \(path) is not a JWK Set (a JSON object with \"keys\"): \(error)")
    }
}

/// The one token a file holds (white space around it trimmed): an empty file, or one of several
/// lines, is refused naming the file, not taken as an empty token or one with a newline in it.
func readToken(_ path: String, what: String) throws -> String {
    let token = String(decoding: try readInput(path, what: what), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard !token.isEmpty else { throw ValidationError("\(what) \(path) holds no token") }
    let lines = token.split(whereSeparator: \.isNewline).count
    guard lines == 1 else { throw ValidationError("\(what) \(path) holds \(lines) lines: one token a file") }
    return token
}

/// The lines of a text, one token a line (`risc verify`'s): white space around each trimmed, empty
/// ones left out.
func nonEmptyLines(_ text: String) -> [String] {
    text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}
