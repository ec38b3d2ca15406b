import ArgumentParser
import Foundation
import RISCCore
import RISCLocal

extension RiscCommand {
    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the event log: its hash chain (issue 28).", subcommands: [LogVerify.self])
    }

    struct LogVerify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Verify the event log's hash chain across its files (logrotate's too, compressed or not).",
            discussion: """
                Reads events.log in the receiver's data directory (from --config, RISC_DATA_DIR or --data-dir) with its \
                rotated files (events.log.N, events.log.N.gz) oldest first, or the FILEs given, in order. Every line's seq \
                must follow the one before and its prev must be the hash of the line before it (docs/operations.md, \
                "The event log's hash chain"). Exit status: 1 when the chain is broken (the first bad line, its file and the reason: bad_json, \
                prev_mismatch, seq_gap, seq_regress); 2 when the chain is whole but that cannot rule out lines cut from \
                the end or a log rewritten whole (no signed checkpoint to compare with yet); a torn line (a write cut off \
                by a crash) is a warning.
                """
        )

        @Option(help: "The receiver's config file: its data_dir.") var config: String?
        @Option(help: "Data directory (default: RISC_DATA_DIR, the config's, else ./data).") var dataDir: String?
        @Flag(help: "Print the result as one JSON object.") var json = false
        @Argument(help: "Log files, oldest first (default: the data directory's events.log and its rotated files).") var files: [String] = []

        func run() throws {
            var files = self.files
            if files.isEmpty {
                let resolved = try StoreOption.resolve(config: config, dataDir: dataDir, storeURL: nil, tokenKeyFile: nil)
                files = EventLogVerifier.files(of: (resolved.dataDirectory as NSString).appendingPathComponent("events.log"))
                guard !files.isEmpty else {
                    throw SetupProblem(
                        "no event log in \(resolved.dataDirectory) (data directory from \(resolved.dataDirectorySource)): name the receiver's with --config FILE, --data-dir DIR, RISC_DATA_DIR, or give the files"
                    )
                }
            }
            let summary: EventLogVerifier.Summary
            do {
                summary = try EventLogVerifier.verify(files: files)
            } catch {
                throw SetupProblem("cannot read the event log: \(error.localizedDescription)")
            }
            print(json ? Self.json(summary, files: files) : Self.text(summary, files: files))
            throw ExitCode(summary.problem == nil ? 2 : 1)
        }

        static func text(_ summary: EventLogVerifier.Summary, files: [String]) -> String {
            var lines: [String] = []
            if let problem = summary.problem {
                lines.append("TAMPERED: \(problem)")
                if let last = summary.lastSeq { lines.append("the chain was whole through seq \(last)") }
            } else if let first = summary.firstSeq, let last = summary.lastSeq {
                lines.append(
                    "chain whole: \(summary.lines) lines, seq \(first)–\(last), in \(files.count) file\(files.count == 1 ? "" : "s")"
                        + (summary.logID.map { ", log \(Printable.safe($0, maxBytes: 80))" } ?? ""))
                if first != 0 { lines.append("note: the first file starts at seq \(first), not at the log's genesis") }
            } else {
                lines.append("no chained line yet")
            }
            if summary.unchained > 0 { lines.append("note: \(summary.unchained) lines from before the chain began (not checked)") }
            for torn in summary.torn { lines.append("warning: \(torn)") }
            if summary.problem == nil {
                lines.append("undecided: no signed checkpoint to compare with, so lines cut from the end or a log rewritten whole would not show")
            }
            return lines.joined(separator: "\n")
        }

        static func json(_ summary: EventLogVerifier.Summary, files: [String]) -> String {
            var object = JSONObject()
            object["result"] = summary.problem == nil ? "undecided" : "tampered"
            object["files"] = .array(files.map { .string($0) })
            object["lines"] = .number(Double(summary.lines))
            object["unchained"] = .number(Double(summary.unchained))
            if let first = summary.firstSeq { object["first_seq"] = .number(Double(first)) }
            if let last = summary.lastSeq { object["last_seq"] = .number(Double(last)) }
            if let logID = summary.logID { object["log_id"] = .string(logID) }
            object["torn"] = .array(summary.torn.map(\.json))
            if let problem = summary.problem { object["problem"] = problem.json }
            if summary.problem == nil { object["warnings"] = ["no_checkpoint"] }
            return JSONValue.object(object).serialized
        }
    }
}
