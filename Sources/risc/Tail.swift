import ArgumentParser
import Foundation
import RISCCore
import RISCLocal

extension RiscCommand {
    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the event log, filtered; coloured on a terminal, plain when piped.",
            discussion: """
                Reads events.log in the receiver's data directory (from --config, RISC_DATA_DIR or --data-dir, as for \
                every command), or --file. With --follow, waits for new lines (and follows a rotated file).
                """
        )

        @Option(help: "The receiver's config file: its data_dir.") var config: String?
        @Option(help: "Data directory (default: RISC_DATA_DIR, the config's, else ./data).") var dataDir: String?
        @Option(help: "Event log file (default DATA_DIR/events.log).") var file: String?
        @Flag(name: .shortAndLong, help: "Keep reading new lines.") var follow = false
        @Option(help: "Only lines with this jti.") var jti: String?
        @Option(help: "Only lines about this subject.") var subject: String?
        @Option(help: "Only lines with this outcome (accepted, duplicate, rejected, failed, applied, dead_lettered, …).")
        var outcome: String?
        @Option(name: [.customShort("n"), .customLong("lines")], parsing: .unconditional, help: "Show the last N matching lines first (default 20; 0 for all).")
        var lines: Int = 20
        @Flag(help: "Print the JSON lines as they are.") var json = false
        @Flag(help: "Print each record indented.") var pretty = false
        @Flag(help: "Check the hash chain as lines are read: say where it stands first, and at once if a line breaks it.") var verify = false

        func validate() throws {
            try OptionRange.atLeast(0, lines, "--lines")
            if let outcome, !EventLogRecord.Outcome.all.contains(.init(rawValue: outcome)) {
                throw ValidationError("--outcome: no line has the outcome \"\(Printable.safe(outcome, maxBytes: 40))\"; known: \(EventLogRecord.Outcome.all.map(\.rawValue).joined(separator: ", "))")
            }
        }

        func matches(_ object: JSONObject) -> Bool {
            if let jti, object["jti"]?.stringValue != jti { return false }
            if let subject, object["subject"]?.stringValue != subject { return false }
            if let outcome, object["outcome"]?.stringValue != outcome { return false }
            return true
        }

        func render(_ line: Substring, color: Bool) -> String? {
            guard let object = try? JSONParser.parseObject(Array(line.utf8)), matches(object) else { return nil }
            if json { return String(line) }
            if pretty { return JSONValue.object(object).prettyPrinted }
            let outcome = object["outcome"]?.stringValue ?? ""
            let paint: String
            switch outcome {
            case "accepted", "applied": paint = "\u{1B}[32m"
            case "duplicate": paint = "\u{1B}[36m"
            case "rejected", "failed": paint = "\u{1B}[33m"
            case "dead_lettered", "dropped": paint = "\u{1B}[31m"
            default: paint = ""
            }
            // Every value is shown through Printable.safe: the log holds what clients sent (a
            // description quoting a header, a forwarded address), and none of it may reach the
            // terminal as control characters.
            func shown(_ text: String, _ maxBytes: Int = 512) -> String { Printable.safe(text, maxBytes: maxBytes) }
            var parts = [
                shown(object["ts"]?.stringValue ?? "", 40), shown(object["step"]?.stringValue ?? "", 40).padded(8),
                shown(outcome, 40).padded(13),
            ]
            for key in [
                "jti", "events", "subject", "err", "description", "aud", "attempt", "actions", "error", "remote", "path", "reason",
                "count", "latency_us",
            ] {
                guard let value = object[key] else { continue }
                parts.append("\(key)=\(shown(value.stringValue ?? value.serialized))")
            }
            let text = parts.joined(separator: " ")
            return color && !paint.isEmpty ? paint + text + "\u{1B}[0m" : text
        }

        func run() async throws {
            let path: String
            if let file {
                path = file
            } else {
                let resolved = try StoreOption.resolve(config: config, dataDir: dataDir, storeURL: nil, tokenKeyFile: nil)
                path = (resolved.dataDirectory as NSString).appendingPathComponent("events.log")
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ValidationError(
                        "no event log at \(path) (data directory from \(resolved.dataDirectorySource)): name the receiver's with --config FILE, --data-dir DIR, RISC_DATA_DIR or --file")
                }
            }
            let color = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
            guard let handle = FileHandle(forReadingAtPath: path) else { throw ValidationError("cannot read \(path)") }
            var chain = ChainCheck(file: path, on: verify)
            let shown: [String]
            if lines > 0 && !verify {
                // The last lines only: read back from the end, never the whole log.
                shown = try Self.lastLines(lines, of: handle) { render($0, color: color) }
            } else {
                let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() { chain.check(line) }
                let all = text.split(separator: "\n").compactMap { render($0, color: color) }
                shown = lines > 0 ? Array(all.suffix(lines)) : all
            }
            if verify { print(chain.status) }
            for line in shown { print(line) }
            guard follow else { return }
            fflush(nil)
            var current = handle
            var inode = Self.inode(path)
            var partial = ""
            while !Task.isCancelled {
                let data = current.availableData
                if data.isEmpty {
                    if Self.inode(path) != inode, let reopened = FileHandle(forReadingAtPath: path) {
                        current = reopened  // rotated: follow the new file
                        inode = Self.inode(path)
                        continue
                    }
                    try await Task.sleep(for: .milliseconds(200))
                    continue
                }
                partial += String(decoding: data, as: UTF8.self)
                while let newline = partial.firstIndex(of: "\n") {
                    if let text = render(partial[..<newline], color: color) { print(text) }
                    if let broken = chain.check(partial[..<newline]) { print(broken) }
                    partial = String(partial[partial.index(after: newline)...])
                }
                fflush(nil)
            }
        }

        /// `--verify`: the chain checked line by line as `tail` reads them (the file it reads may
        /// start mid-chain, after a rotation: it is taken from its first line on).
        struct ChainCheck {
            var verifier = EventLogVerifier()
            var number = 0
            let file: String
            let on: Bool

            init(file: String, on: Bool) {
                self.file = file
                self.on = on
            }

            /// Checks one line; the message to print when it is the one that breaks the chain.
            @discardableResult
            mutating func check(_ line: Substring) -> String? {
                guard on, !verifier.broken else { return nil }
                number += 1
                verifier.check(ArraySlice(line.utf8), file: file, number: number)
                return verifier.summary.problem.map { "!! hash chain broken: \($0)" }
            }

            var status: String {
                let summary = verifier.summary
                if let problem = summary.problem { return "!! hash chain broken: \(problem)" }
                guard let first = summary.firstSeq, let last = summary.lastSeq else { return "hash chain: no chained line yet" }
                return "hash chain: whole from seq \(first) to \(last) (\(summary.torn.count) torn); `risc log verify` checks it against the signed checkpoints"
            }
        }

        /// The last `count` lines of the file that `render` shows, in file order, read backwards in
        /// chunks from its end (a log of hundreds of megabytes is not read whole to show 20 lines).
        /// A run of more than `longest` bytes without a newline (zeros a crash left, a file that is
        /// no log) is no line of the log's: it is passed over, not gathered. Leaves the handle at
        /// the end of the file, where `--follow` goes on.
        static func lastLines(
            _ count: Int, of handle: FileHandle, chunk: Int = 1 << 16, longest: Int = 1 << 20, render: (Substring) -> String?
        ) throws -> [String] {
            let end = try handle.seekToEnd()
            var position = end
            var carry: [UInt8] = []  // the end of the earliest line seen, whose start is further back
            var skipping = false  // inside a run longer than `longest`
            var found: [String] = []
            while found.count < count && position > 0 {
                let start = position - min(position, UInt64(chunk))
                try handle.seek(toOffset: start)
                var bytes = [UInt8](try handle.read(upToCount: Int(position - start)) ?? Data())
                position = start
                if !skipping { bytes += carry }
                var pieces = bytes.split(separator: 10, omittingEmptySubsequences: false)
                if skipping {
                    pieces.removeLast()  // more of the over-long run
                    if pieces.isEmpty { continue }
                    skipping = false
                }
                carry = position > 0 ? Array(pieces.removeFirst()) : []
                if carry.count > longest { (carry, skipping) = ([], true) }
                for piece in pieces.reversed() where found.count < count {
                    if let text = render(Substring(String(decoding: piece, as: UTF8.self))) { found.append(text) }
                }
            }
            try handle.seek(toOffset: end)
            return found.reversed()
        }

        static func inode(_ path: String) -> UInt64 {
            var info = stat()
            return stat(path, &info) == 0 ? UInt64(info.st_ino) : 0
        }
    }
}
