import ArgumentParser
import Foundation
import RISCCore
import RISCServer
import RISCStorage

/// `risc`: a receiver for Google Cross-Account Protection (RISC) security events.
///
/// Exit codes: 0 success; 1 the input was refused (for `verify`: an RFC 8935 rejection);
/// 3 a temporary failure on our side (key set unavailable, I/O); 64 a usage error; 69 a store
/// that cannot be reached now.
@main
struct RiscCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "risc",
        abstract: "Receive, verify and act on Google Cross-Account Protection (RISC) security events.",
        version: RiscCommand.version,
        subcommands: [
            Serve.self, Verify.self, Accounts.self, Queue.self, Store.self, Replay.self, Tail.self, Log.self, Keys.self, Sign.self, DevIssuer.self, Bench.self, Stream.self, Drill.self, Linking.self,
            ScratchWarden.self,
        ]
    )

    /// The first word of `arguments` that stands where a subcommand must and names none, said with
    /// the group's subcommands. ArgumentParser reads such a word as an argument of the group and
    /// then trips on the next option: `risc queue stats --data-dir D` said `Unknown option
    /// '--data-dir'`, which every queue command takes. Nil when there is no such word (the error
    /// is then ArgumentParser's own).
    static func unknownSubcommand(_ arguments: [String]) -> (message: String, group: String)? {
        var command: any ParsableCommand.Type = RiscCommand.self
        var group = "risc"
        for argument in arguments {
            let subcommands = command.configuration.subcommands
            guard !argument.hasPrefix("-"), argument != "help", !subcommands.isEmpty, command.configuration.defaultSubcommand == nil else { return nil }
            guard let next = subcommands.first(where: { $0._commandName == argument }) else {
                let names = subcommands.map { $0._commandName }.joined(separator: ", ")
                return ("'\(Printable.safe(argument, maxBytes: 60))' is not a subcommand of \(group) (\(names))", group)
            }
            command = next
            group += " " + argument
        }
        return nil
    }

    /// As ArgumentParser's, except that a `ValidationError` thrown while running, a `SetupProblem`
    /// or a `ConfigurationError` (the command line was fine, what it names is not) prints its
    /// message without the usage text and exits 64, as does a store that refuses
    /// (`StoreError.refused`); a driver's error is told in the store's words (`Storage.explain`).
    static func main() async {
        // The arguments' own errors (and `validate()`'s) are ArgumentParser's, with the command's usage.
        var command: any ParsableCommand
        do { command = try parseAsRoot() } catch {
            if let unknown = unknownSubcommand(Array(CommandLine.arguments.dropFirst())) {
                FileHandle.standardError.write(Data("Error: \(unknown.message)\n  See '\(unknown.group) --help' for more information.\n".utf8))
                Foundation.exit(64)
            }
            exit(withError: error)
        }
        do {
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let problem as ValidationError {
            // Found while running: what the arguments name is wrong, not their syntax. The usage
            // text would be the whole program's (`Usage: risc <subcommand>`), which says nothing of it.
            FileHandle.standardError.write(Data("Error: \(problem.message)\n".utf8))
            Foundation.exit(64)
        } catch let problem as SetupProblem {
            FileHandle.standardError.write(Data("risc: \(problem.message)\n".utf8))
            Foundation.exit(64)
        } catch let problem as ConfigurationError {
            FileHandle.standardError.write(Data("risc: \(problem)\n".utf8))
            Foundation.exit(64)
        } catch {
            // A store that refuses (damaged, a newer schema, a wrong password): 64, as the man page
            // says, so nothing retries what a retry cannot mend; one not reached now: 69, as
            // `serve --check-config --connect` says it, for a script to try again later.
            let explained = Storage.explain(error)
            let status: Int32
            switch (explained as? StoreError)?.code {
            case .refused?: status = 64
            case .unavailable?, .timeout?: status = 69
            default: exit(withError: explained)
            }
            FileHandle.standardError.write(Data("risc: \(explained)\n".utf8))
            Foundation.exit(status)
        }
    }
}

/// A command line that parsed but names what cannot be used (no store where it points, a store
/// that refuses): exit 64 like a usage error, without the usage text, which would not help.
struct SetupProblem: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

extension RiscCommand {
    /// The release and the commit it was built from (`BuildInfo`, generated at build time).
    static let release = "0.1.0"
    static let version = "\(release) (commit \(BuildInfo.commit))"
}

/// Documented exit statuses.
enum ExitStatus {
    static let rejected = ExitCode(1)
    static let temporaryFailure = ExitCode(3)
}
