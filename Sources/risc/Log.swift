import ArgumentParser
import Foundation
import RISCCore
import RISCLocal

extension RiscCommand {
    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The event log's proofs: its hash chain, signed checkpoints and inclusion proofs.", subcommands: [LogVerify.self, LogCheckpoint.self, LogProve.self, LogCheckProof.self])
    }

    /// The event log's files and newest checkpoint, from the files given or the data directory.
    struct LogLocation: ParsableArguments {
        @Option(help: "The receiver's config file: its data_dir.") var config: String?
        @Option(help: "Data directory (default: RISC_DATA_DIR, the config's, else ./data).") var dataDir: String?

        func eventLog() throws -> String {
            let resolved = try StoreOption.resolve(config: config, dataDir: dataDir, storeURL: nil, tokenKeyFile: nil)
            let path = (resolved.dataDirectory as NSString).appendingPathComponent("events.log")
            guard !EventLogSegments.files(of: path).isEmpty || !EventLogSegments.discover(path).isEmpty else {
                throw SetupProblem(
                    "no event log in \(resolved.dataDirectory) (data directory from \(resolved.dataDirectorySource)): name the receiver's with --config FILE, --data-dir DIR, RISC_DATA_DIR, or give the files"
                )
            }
            return path
        }
    }

    struct LogVerify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Verify the event log: its hash chain across its files, and its signed checkpoints.",
            discussion: """
                Reads events.log in the receiver's data directory (from --config, RISC_DATA_DIR or --data-dir) with its \
                segments and their digests (events-NNNNNN.log, .digest) or logrotate's files (events.log.N, events.log.N.gz) \
                oldest first, or the FILEs given, in order. Every digest must name the one before it (and, with --key, be \
                signed by it) and hash its segment's file, unless a later digest names the file expired. Every line's seq \
                must follow the one before and its prev must be the hash of the line before it; with --key, the log's \
                newest checkpoint (events.checkpoint, or --checkpoint) and a --trusted-checkpoint kept elsewhere must be \
                signed by that key and match the log's Merkle tree (docs/operations.md, "The event log's hash chain, checkpoints and segments"). \
                Exit status: 0 verified (lines after the newest checkpoint are a warning); 1 tampered (the first bad line \
                or checkpoint and why: bad_json, prev_mismatch, seq_gap, seq_regress, segment_missing, segment_hash_mismatch, \
                digest_sig_invalid, digest_chain_broken, checkpoint_invalid, truncated, root_mismatch, rollback); 2 undecided (no key, no checkpoint yet). A torn line (a write cut off by a \
                crash) is a warning.
                """
        )

        @OptionGroup var location: LogLocation
        @Option(help: "The verifier key (name+id+key, as `risc keys checkpoint-key` prints it), or a file holding it.") var key: String?
        @Option(help: "The log's newest checkpoint (default DATA_DIR/events.checkpoint).", transform: OptionRange.path) var checkpoint: String?
        @Option(help: "A checkpoint kept elsewhere (off the box): the log must still hold what it signed.", transform: OptionRange.path) var trustedCheckpoint: String?
        @Flag(help: "Print the result as one JSON object.") var json = false
        @Argument(help: "Log files, oldest first (default: the data directory's events.log and its rotated files).", transform: OptionRange.path) var files: [String] = []

        func run() throws {
            var files = self.files
            var checkpointFile = checkpoint
            var logPath: String?
            if files.isEmpty {
                let path = try location.eventLog()
                files = EventLogSegments.files(of: path)
                logPath = path
                checkpointFile = checkpointFile ?? JSONLinesEventLog.checkpointPath(of: path)
            }
            func read(_ path: String?) -> String? {
                path.flatMap { FileManager.default.contents(atPath: $0) }.map { String(decoding: FileContents.text(Array($0)), as: UTF8.self) }
            }
            let verifier: CheckpointVerifier?
            do {
                verifier = try key.map(CheckpointVerifier.init(argument:))
            } catch {
                throw SetupProblem("--key: \(error)")
            }
            if let trustedCheckpoint, read(trustedCheckpoint) == nil { throw SetupProblem("cannot read --trusted-checkpoint \(trustedCheckpoint)") }
            let audit: EventLogAudit
            do {
                if let logPath {
                    audit = try EventLogAudit.run(path: logPath, key: verifier, checkpointNote: read(checkpointFile), trustedNote: read(trustedCheckpoint))
                } else {
                    audit = try EventLogAudit.run(files: files, key: verifier, checkpointNote: read(checkpointFile), trustedNote: read(trustedCheckpoint))
                }
            } catch {
                throw SetupProblem("\(error)")
            }
            print(json ? Self.json(audit, files: files) : Self.text(audit, files: files))
            switch audit.result {
            case .verified: return
            case .tampered: throw ExitCode(1)
            case .undecided: throw ExitCode(2)
            }
        }

        static func text(_ audit: EventLogAudit, files: [String]) -> String {
            let summary = audit.summary
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
            if let problem = audit.checkpointProblem { lines.append("TAMPERED: \(problem.reason.rawValue): \(problem.detail)") }
            if summary.unchained > 0 { lines.append("note: \(summary.unchained) lines from before the chain began (not checked)") }
            for torn in summary.torn { lines.append("warning: \(torn)") }
            if let checkpoint = audit.checkpoint {
                lines.append("checkpoint: \(checkpoint.size) lines signed at \(Timestamp.iso8601(checkpoint.time)), root matches")
                if audit.unsealed > 0 { lines.append("warning: tail_unsealed: \(audit.unsealed) lines after the newest checkpoint") }
                lines.append("VERIFIED")
            }
            if let reason = audit.undecidedBecause { lines.append("undecided: \(reason)") }
            return lines.joined(separator: "\n")
        }

        static func json(_ audit: EventLogAudit, files: [String]) -> String {
            let summary = audit.summary
            var object = JSONObject()
            object["result"] = .string(audit.result.rawValue)
            object["files"] = .array(files.map { .string($0) })
            object["lines"] = .number(Double(summary.lines))
            object["unchained"] = .number(Double(summary.unchained))
            if let first = summary.firstSeq { object["first_seq"] = .number(Double(first)) }
            if let last = summary.lastSeq { object["last_seq"] = .number(Double(last)) }
            if let logID = summary.logID { object["log_id"] = .string(logID) }
            object["torn"] = .array(summary.torn.map(\.json))
            if let problem = summary.problem { object["problem"] = problem.json }
            if let problem = audit.checkpointProblem { object["problem"] = ["reason": .string(problem.reason.rawValue), "detail": .string(problem.detail)] }
            if let checkpoint = audit.checkpoint {
                object["checkpoint"] = ["size": .number(Double(checkpoint.size)), "time": .string(Timestamp.iso8601(checkpoint.time))]
                object["unsealed"] = .number(Double(audit.unsealed))
            }
            if let reason = audit.undecidedBecause { object["undecided"] = .string(reason) }
            return JSONValue.object(object).serialized
        }
    }

    struct LogCheckpoint: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "checkpoint", abstract: "Print the event log's newest signed checkpoint (a C2SP signed note), to keep elsewhere.")

        @OptionGroup var location: LogLocation

        func run() throws {
            let file = JSONLinesEventLog.checkpointPath(of: try location.eventLog())
            guard let data = FileManager.default.contents(atPath: file) else {
                throw SetupProblem("no checkpoint at \(file): checkpoints are made when event_log_checkpoint_key is set")
            }
            print(String(decoding: data, as: UTF8.self), terminator: "")
        }
    }

    struct LogProve: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prove",
            abstract: "Print one event's lines with inclusion proofs against the newest signed checkpoint (JSON), for an auditor.",
            discussion: """
                Each line of the event (by its jti) is given with its RFC 9162 inclusion proof against the tree the \
                checkpoint signed; `risc log check-proof FILE --key PUB` checks the document with nothing but the verifier \
                key. Lines written after the checkpoint cannot be proved yet: wait for the next one.
                """
        )

        @OptionGroup var location: LogLocation
        @Option(help: "The event's jti.") var jti: String
        @Option(help: "The checkpoint to prove against (default DATA_DIR/events.checkpoint).", transform: OptionRange.path) var checkpoint: String?

        func run() throws {
            let path = try location.eventLog()
            let file = checkpoint ?? JSONLinesEventLog.checkpointPath(of: path)
            let data: [UInt8]
            do { data = try FileContents.readText(file) } catch { throw SetupProblem(checkpoint == nil ? "no checkpoint at \(file)" : "\(error)") }
            let note = String(decoding: data, as: UTF8.self)
            let proof: EventLogProof
            do {
                proof = try EventLogProof.make(log: path, jti: jti, note: note, checkpoint: try EventLogCheckpoint.parse(note: note))
            } catch {
                throw SetupProblem("cannot prove: \(error)")
            }
            guard !proof.entries.isEmpty else {
                throw SetupProblem(
                    proof.unsealed > 0
                        ? "the lines of \(Printable.safe(jti, maxBytes: 80)) came after the newest checkpoint: prove them after the next one"
                        : "no line of the event log has jti \(Printable.safe(jti, maxBytes: 80))"
                            + (proof.goneBefore > 0 ? " (lines 0–\(proof.goneBefore - 1) were in segments event_log_retention deleted: those cannot be proved)" : ""))
            }
            print(proof.json)
            if proof.unsealed > 0 {
                FileHandle.standardError.write(Data("note: \(proof.unsealed) later lines of the event are after the checkpoint\n".utf8))
            }
        }
    }

    struct LogCheckProof: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-proof", abstract: "Check a `risc log prove` document with the verifier key: exit 0 when every line is proved, 1 when not.")

        @Argument(help: "The proof document (JSON).", transform: OptionRange.path) var file: String
        @Option(help: "The verifier key (name+id+key), or a file holding it.") var key: String
        @Option(help: "The event the proof is for: every line must be about this jti.") var jti: String?

        func run() throws {
            let data: [UInt8]
            do { data = FileContents.text(try file == "-" ? FileContents.readStandardInput() : FileContents.read(file)) } catch {
                throw SetupProblem("\(error)")
            }
            let verifier: CheckpointVerifier
            do {
                verifier = try CheckpointVerifier(argument: key)
            } catch {
                throw SetupProblem("--key: \(error)")
            }
            do {
                let (checkpoint, lines) = try EventLogProof.check(json: String(decoding: data, as: UTF8.self), key: verifier, jti: jti)
                print("PROVED: \(lines.count) line\(lines.count == 1 ? "" : "s") in \(checkpoint.origin)'s first \(checkpoint.size), signed at \(Timestamp.iso8601(checkpoint.time))")
                for line in lines { print(Printable.safe(line, maxBytes: 4096)) }
            } catch {
                print("NOT PROVED: \(error)")
                throw ExitCode(1)
            }
        }
    }
}

extension CheckpointVerifier {
    /// `--key`: the verifier key itself, or a file holding it (`risc keys checkpoint-key`'s FILE.pub).
    /// A verifier key is `name+hexID+base64`: an argument without two `+` is a file, and one that
    /// cannot be read says why rather than "not a verifier key".
    init(argument: String) throws {
        let looksLikeKey = argument.split(separator: "+", omittingEmptySubsequences: false).count >= 3
        let text = looksLikeKey && !FileManager.default.fileExists(atPath: argument) ? argument : String(decoding: try FileContents.readText(argument), as: UTF8.self)
        try self.init(text)
    }
}
