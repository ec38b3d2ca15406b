import ArgumentParser
import Foundation
import RISCCore
import RISCLocal
import Synchronization

extension RiscCommand {
    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the event log, filtered; coloured on a terminal, plain when piped.",
            discussion: """
                Reads events.log in the receiver's data directory (from --config, RISC_DATA_DIR or --data-dir, as for \
                every command), back through its rotated segments and logrotate's files while lines are missing \
                (all of them with -n 0), with the lines commands wrote beside it while a receiver was writing it \
                (events.cli.log, events.replay.log), in time order; or --file alone. With --follow, waits for new \
                lines (and follows a rotated file).
                """
        )

        @Option(help: "The receiver's config file: its data_dir.") var config: String?
        @Option(help: "Data directory (default: RISC_DATA_DIR, the config's, else ./data).") var dataDir: String?
        @Option(help: "Event log file (default DATA_DIR/events.log).", transform: OptionRange.path) var file: String?
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

        /// A line as shown, with its time (for merging files), or nil when it is not shown.
        func render(_ line: Substring, color: Bool) -> (ts: String, text: String)? {
            guard let object = try? JSONParser.parseObject(Array(line.utf8)), object["step"]?.stringValue != nil else {
                // Not a record (a damaged or hand-edited file, another tool's line): shown as it is,
                // in its place (its time is its neighbour's), unless a filter asks for records.
                guard !line.allSatisfy(\.isWhitespace), jti == nil, subject == nil, outcome == nil else { return nil }
                if json || pretty {
                    Self.foreignLines.withLock { $0 += 1 }
                    return nil
                }
                return ("", "?? not an event-log record: " + Printable.safe(String(line), maxBytes: 512))
            }
            guard matches(object) else { return nil }
            let ts = object["ts"]?.stringValue ?? ""
            if json { return (ts, String(line)) }
            if pretty { return (ts, JSONValue.object(object).prettyPrinted) }
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
            var parts = [shown(ts, 40), shown(object["step"]?.stringValue ?? "", 40).padded(8), shown(outcome, 40).padded(13)]
            for key in [
                "jti", "events", "subject", "err", "description", "aud", "attempt", "actions", "error", "remote", "path", "reason",
                "count", "latency_us", "source", "user_id", "previous_user_id",
            ] {
                guard let value = object[key] else { continue }
                parts.append("\(key)=\(shown(value.stringValue ?? value.serialized))")
            }
            let text = parts.joined(separator: " ")
            return (ts, color && !paint.isEmpty ? paint + text + "\u{1B}[0m" : text)
        }

        /// The files a command writes beside `events.log` while a receiver writes that one (one
        /// writer a file keeps each hash chain whole: `commandEventLog`); `tail` shows them with it.
        static let commandFiles = ["events.cli.log", "events.replay.log"]

        /// One file `tail` reads: where it is, how far, and its chain check.
        struct Source {
            let path: String
            var handle: FileHandle?
            var inode: UInt64 = 0
            var partial = ""
            var chain: ChainCheck
            /// Files moved away that are still read for a while (`Moved`).
            var moved: [Moved] = []
            /// The size of the file `open` opened, as it was then: read past it, the file has grown
            /// since, so its writer has moved on from the files moved before it.
            var openedSize: UInt64 = 0

            init(path: String, verify: Bool) {
                self.path = path
                chain = ChainCheck(file: path, on: verify)
                open()
            }

            /// Opens the file at `path`, its inode the opened file's (the path's, read apart, could
            /// already name the next file when a rotation fell between the two).
            mutating func open() {
                handle = FileHandle(forReadingAtPath: path)
                var info = stat()
                let found = handle.map { fstat($0.fileDescriptor, &info) == 0 } ?? false
                inode = found ? UInt64(info.st_ino) : 0
                openedSize = found ? UInt64(info.st_size) : 0
            }
        }

        /// A file `--follow` read until it was moved: a receiver whose log logrotate moved writes
        /// to it until its SIGHUP, so it is read on until the new file has had a line (the writer has
        /// moved on; it never writes to the old file again) and then `polls` looks found nothing.
        struct Moved {
            let handle: FileHandle
            var partial = ""
            var polls = 5
        }

        /// The files rotated after the one whose inode was `from` and before the one whose inode is
        /// `to` (or after it all, when `to` is still the log's own), oldest first (risc's segments or
        /// logrotate's moves): those a burst of rotations between two looks made.
        static func rotated(after from: UInt64, before to: UInt64, of path: String) -> [String] {
            let files = EventLogSegments.files(of: path).filter { $0 != path }
            guard let index = files.lastIndex(where: { Self.inode($0) == from }) else { return [] }
            return Array(files[(index + 1)...].prefix { Self.inode($0) != to })
        }

        func run() async throws {
            var sources: [Source]
            var earlier: [String] = []  // events.log's rotated files still held, oldest first
            if let file {
                sources = [Source(path: file, verify: verify)]
            } else {
                let resolved = try StoreOption.resolve(config: config, dataDir: dataDir, storeURL: nil, tokenKeyFile: nil)
                let path = (resolved.dataDirectory as NSString).appendingPathComponent("events.log")
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ValidationError(
                        "no event log at \(path) (data directory from \(resolved.dataDirectorySource)): name the receiver's with --config FILE, --data-dir DIR, RISC_DATA_DIR or --file")
                }
                earlier = EventLogSegments.files(of: path).filter { $0 != path }
                sources =
                    [Source(path: path, verify: verify)]
                    + Self.commandFiles.map { Source(path: (resolved.dataDirectory as NSString).appendingPathComponent($0), verify: verify) }
            }
            guard sources[0].handle != nil else { throw ValidationError("cannot read \(sources[0].path)") }
            let color = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
            if lines > 0 && !verify {
                var shown: [[(ts: String, text: String)]] = []
                for index in sources.indices {
                    guard let handle = sources[index].handle else { continue }
                    // The last lines only: read back from the end, never the whole log; into the
                    // rotated files, newest first, while lines are missing.
                    var found = try Self.lastLines(lines, of: handle) { render($0, color: color) }
                    for older in (index == 0 ? earlier : []).reversed() where found.count < lines {
                        found = Self.readable(older) { try Self.lastLines(lines - found.count, ofFile: older) { render($0, color: color) } } + found
                    }
                    shown.append(found)
                }
                for line in Self.merge(shown).suffix(lines) { print(line) }
            } else {
                try showWhole(&sources, earlier: earlier, color: color)
            }
            fflush(nil)
            Self.reportForeignLines()
            guard follow else { return }
            func showLine(_ line: Substring, _ chain: inout ChainCheck) {
                if let entry = render(line, color: color) { print(entry.text) }
                if let broken = chain.check(ArraySlice(line.utf8)) { print(broken) }
            }
            /// Shows the whole lines `text` ends (with what `partial` held) and keeps the rest.
            func show(_ text: String, _ partial: inout String, _ chain: inout ChainCheck) {
                partial += text
                while let newline = partial.firstIndex(of: "\n") {
                    showLine(partial[..<newline], &chain)
                    partial = String(partial[partial.index(after: newline)...])
                }
            }
            /// One look at a source's files; whether it read anything.
            func look(_ source: inout Source) -> Bool {
                var read = false
                let movedOn = source.moved.isEmpty || (source.handle.flatMap { try? $0.offset() } ?? 0) > source.openedSize
                for slot in source.moved.indices.reversed() {
                    let data = source.moved[slot].handle.availableData
                    if data.isEmpty {
                        guard movedOn else { continue }
                        source.moved[slot].polls -= 1
                        if source.moved[slot].polls <= 0 { try? source.moved.remove(at: slot).handle.close() }
                    } else {
                        read = true
                        show(String(decoding: data, as: UTF8.self), &source.moved[slot].partial, &source.chain)
                    }
                }
                guard let handle = source.handle else {
                    source.open()  // a command's file that did not exist yet
                    return read || source.handle != nil
                }
                let data = handle.availableData
                if !data.isEmpty {
                    show(String(decoding: data, as: UTF8.self), &source.partial, &source.chain)
                    return true
                }
                guard Self.inode(source.path) != source.inode, FileManager.default.fileExists(atPath: source.path) else { return read }
                // Rotated: what the moved file got since the last look, every file rotated after
                // it and before the one opened now (which may itself be rotated by then), then that
                // one; the moved one is read on a while.
                show(String(decoding: handle.availableData, as: UTF8.self), &source.partial, &source.chain)
                source.moved.append(Moved(handle: handle, partial: source.partial))
                source.partial = ""
                let previous = source.inode
                source.open()
                for file in Self.rotated(after: previous, before: source.inode, of: source.path) {
                    let lines = SourceLines(earlier: [file], own: nil, withRest: true)
                    while let line = try? lines.next() { showLine(Self.text(line), &source.chain) }
                }
                return true
            }
            while !Task.isCancelled {
                var read = false
                for index in sources.indices where look(&sources[index]) { read = true }
                fflush(nil)
                Self.reportForeignLines()
                if !read { try await Task.sleep(for: .milliseconds(200)) }
            }
        }

        /// The whole log (`-n 0`), or every line of it for `--verify`: read a chunk at a time, the
        /// sources merged by time as they are read, and only the lines still to be shown kept, so
        /// a log of gigabytes takes the memory of a few lines. With `--verify` each source's own
        /// file is read once to check its chain, whose status comes before the lines: then its last
        /// `lines` read back from where the check stopped, or (`-n 0`) all of it read again up to there.
        /// What follows a file's last newline is shown as a line, or, with `--follow`, kept until
        /// the rest of it comes.
        func showWhole(_ sources: inout [Source], earlier: [String], color: Bool) throws {
            var ends: [Int: UInt64] = [:]  // with --verify: the bytes checked of each source's file
            if verify {
                var kept: [[(ts: String, text: String)]] = []
                for index in sources.indices {
                    guard let handle = sources[index].handle else { continue }
                    // An over-long run is checked (as its first 1 MiB: no record), not passed over.
                    let reader = LogLines(handle: handle, path: sources[index].path, cutting: true)
                    // A pipe (`--file <(…)`) is read once: its last lines are kept as the check reads them.
                    let once = !Self.isRegular(handle)
                    guard !once || lines > 0 else { throw ValidationError("--verify -n 0 reads \(sources[index].path) twice: give a file, not a pipe") }
                    var last: [(ts: String, text: String)] = []
                    func keep(_ line: ArraySlice<UInt8>) {
                        if once, let shown = render(Self.text(line), color: color) { Self.keep(shown, last: lines, in: &last) }
                    }
                    while let line = try reader.next() {
                        sources[index].chain.check(line)
                        keep(line)
                    }
                    if follow { sources[index].partial = String(decoding: reader.rest, as: UTF8.self) } else if !reader.rest.isEmpty { keep(reader.rest) }
                    ends[index] = reader.consumed
                    print(index == 0 ? sources[index].chain.status : "\((sources[index].path as NSString).lastPathComponent): \(sources[index].chain.status)")
                    guard lines > 0 else { continue }
                    guard !once else {
                        kept.append(Array(last.suffix(lines)))
                        continue
                    }
                    // A file's last lines read back from where the check ended (with --follow,
                    // before a line still being written), not every line rendered on the way (2.6
                    // million lines: 15.7 s against 4.5 for the check).
                    let end = reader.consumed - UInt64(follow ? reader.rest.count : 0)
                    kept.append(try Self.lastLines(lines, of: handle, end: end) { render($0, color: color) })
                    try handle.seek(toOffset: reader.consumed)
                }
                guard lines == 0 else {
                    for line in Self.merge(kept).suffix(lines) { print(line) }
                    return
                }
                for index in sources.indices { try sources[index].handle?.seek(toOffset: 0) }
            }
            let read = sources.indices.filter { sources[$0].handle != nil }
            let streams = read.map { index in
                SourceLines(
                    earlier: index == 0 && !verify ? earlier : [],
                    own: LogLines(handle: sources[index].handle!, path: sources[index].path, limit: ends[index] ?? .max), withRest: !follow)
            }
            var heads: [(ts: String, text: String)?] = streams.map { _ in nil }, times = streams.map { _ in "" }
            func advance(_ stream: Int) throws {
                heads[stream] = nil
                while heads[stream] == nil, let line = try streams[stream].next() {
                    heads[stream] = render(Self.text(line), color: color)
                }
            }
            for stream in streams.indices { try advance(stream) }
            // A line with no time goes with the line before it (a file's lines are nearly, not
            // strictly, in time order: threads write them).
            func time(_ stream: Int) -> String { heads[stream].map { $0.ts.isEmpty ? times[stream] : $0.ts } ?? "" }
            while let stream = streams.indices.filter({ heads[$0] != nil }).min(by: { time($0) < time($1) }) {
                times[stream] = time(stream)
                print(heads[stream]!.text)
                try advance(stream)
            }
            if follow && !verify {
                for (index, stream) in zip(read, streams) { sources[index].partial = String(decoding: stream.own?.rest ?? [], as: UTF8.self) }
            }
        }

        /// One source's lines front to back: the files rotated before it (oldest first; one that
        /// cannot be read is said on standard error and passed over, the others still shown),
        /// then its own file from where its handle stands. `withRest`: what follows the last
        /// newline of its own file is a line too (else it stays in `own.rest`, for `--follow`).
        final class SourceLines {
            private enum Phase { case earlier, own, done }
            private var earlier: [String]
            let own: LogLines?
            private let withRest: Bool
            private var phase = Phase.earlier
            private var reader: LogLines?  // of the earlier file being read
            private var rest: [UInt8]?  // an earlier file's unterminated end, its last line

            init(earlier: [String], own: LogLines?, withRest: Bool) {
                (self.earlier, self.own, self.withRest) = (earlier, own, withRest)
            }

            func next() throws -> ArraySlice<UInt8>? {
                while true {
                    if let line = rest {
                        rest = nil
                        return line[...]
                    }
                    switch phase {
                    case .done:
                        return nil
                    case .own:
                        guard let own else { return nil }
                        if let line = try own.next() { return line }
                        phase = .done
                        if withRest && !own.rest.isEmpty { return own.rest }
                    case .earlier:
                        if let reader {
                            do {
                                if let line = try reader.next() { return line }
                                if !reader.rest.isEmpty { rest = Array(reader.rest) }
                            } catch {
                                Tail.cannotRead(reader.path, error)
                            }
                            reader.close()
                            self.reader = nil
                        } else if earlier.isEmpty {
                            phase = .own
                        } else {
                            let file = earlier.removeFirst()
                            do { reader = try LogLines(path: file) } catch { Tail.cannotRead(file, error) }
                        }
                    }
                }
            }
        }

        /// The shown lines of several files in one sequence by time, each file's own order kept
        /// (a file's lines are nearly, not strictly, in time order: threads write them); a line
        /// with no time goes with the line before it.
        static func merge(_ files: [[(ts: String, text: String)]]) -> [String] {
            guard files.count > 1 else { return files.first?.map(\.text) ?? [] }
            var next = files.map { _ in 0 }, last = files.map { _ in "" }
            var merged: [String] = []
            merged.reserveCapacity(files.reduce(0) { $0 + $1.count })
            func time(_ file: Int) -> String { files[file][next[file]].ts.isEmpty ? last[file] : files[file][next[file]].ts }
            while let file = files.indices.filter({ next[$0] < files[$0].count }).min(by: { time($0) < time($1) }) {
                last[file] = time(file)
                merged.append(files[file][next[file]].text)
                next[file] += 1
            }
            return merged
        }

        /// Lines `--json` and `--pretty` left out because they are not event-log records.
        static let foreignLines = Mutex(0)

        /// Says on standard error how many lines were left out since last said.
        static func reportForeignLines() {
            let count = foreignLines.withLock { count in
                defer { count = 0 }
                return count
            }
            guard count > 0 else { return }
            FileHandle.standardError.write(Data("risc tail: left out \(count) line\(count == 1 ? "" : "s") that are not event-log records\n".utf8))
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
            mutating func check(_ line: ArraySlice<UInt8>) -> String? {
                guard on, !verifier.broken else { return nil }
                number += 1
                verifier.check(line, file: file, number: number)
                return verifier.summary.problem.map { "!! hash chain broken: \($0)" }
            }

            var status: String {
                let summary = verifier.summary
                if let problem = summary.problem { return "!! hash chain broken: \(problem)" }
                guard let first = summary.firstSeq, let last = summary.lastSeq else { return "hash chain: no chained line yet" }
                return "hash chain: whole from seq \(first) to \(last) (\(summary.torn.count) torn); `risc log verify` checks it against the signed checkpoints"
            }
        }
    }
}
