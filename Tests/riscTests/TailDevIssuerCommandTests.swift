import Foundation
import RISCClient
import RISCCore
import RISCLocal
import RISCTestKit
import Testing

@Suite("risc tail and risc dev-issuer (the built binary)")
struct TailDevIssuerCommandTests {
    /// `risc tail` read the whole log to show its last lines: a log of gigabytes was read into
    /// memory (under a 2 GB address-space limit the command crashed). It reads back from the end.
    @Test("tail -n reads the log back from its end: a 3 GB log (sparse) shows its last lines within a 2 GB address-space limit")
    func tailReadsTheEnd() async throws {
        let path = Scratch.root.appendingPathComponent("risc-tail-big-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try #require(FileManager.default.createFile(atPath: path, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 3 << 30)  // a hole: takes no disk
        try handle.seekToEnd()
        // A line longer than the chunk tail reads back at a time, between two short ones, and a
        // last line still being written (no newline yet).
        let lines = [
            #"{"v":1,"step":"received","outcome":"accepted","jti":"first","subject":"s1"}"#,
            #"{"v":1,"step":"received","outcome":"accepted","jti":"long","subject":"s2","pad":""# + String(repeating: "x", count: 150_000) + #""}"#,
            #"{"v":1,"step":"applied","outcome":"applied","jti":"after","subject":"s1"}"#,
            #"{"v":1,"step":"received","outcome":"rejected","err":"invalid_audience"}"#,
        ]
        try handle.write(contentsOf: Data(("\n" + lines.joined(separator: "\n")).utf8))
        try handle.close()
        func tail(_ options: String) async throws -> RiscBinary.Result {
            try await RiscBinary.run(
                ["-c", "ulimit -v 2000000; exec \(RiscBinary.url.path) tail --file \(path) --json \(options)"], executable: URL(fileURLWithPath: "/bin/sh"))
        }
        // Compared as a whole, reported short (one line is 150 kB).
        for (options, expected) in [("-n 3", Array(lines[1...])), ("-n 2 --subject s1", [lines[0], lines[2]]), ("-n 1 --outcome rejected", [lines[3]])] {
            let result = try await tail(options)
            let shown = result.stdout == expected.joined(separator: "\n") + "\n"
            #expect(result.status == 0 && shown, "tail \(options): status \(result.status), \(result.stdout.utf8.count) bytes: \(result.stdout.prefix(120)) \(result.stderr.prefix(300))")
        }
    }

    @Test("tail filters by jti, subject and outcome; plain when piped; --json passes lines through")
    func tail() async throws {
        let data = Scratch.root.appendingPathComponent("risc-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let lines = [
            #"{"v":1,"ts":"2026-01-01T00:00:00.000000Z","step":"received","outcome":"accepted","jti":"a","subject":"s1","events":["sessions-revoked"]}"#,
            #"{"v":1,"ts":"2026-01-01T00:00:01.000000Z","step":"received","outcome":"rejected","err":"invalid_audience"}"#,
            #"{"v":1,"ts":"2026-01-01T00:00:02.000000Z","step":"applied","outcome":"applied","jti":"a","subject":"s1"}"#,
            "not json",
        ]
        try Data(lines.joined(separator: "\n").utf8).write(to: data.appendingPathComponent("events.log"))
        let all = try await RiscBinary.run(["tail", "--data-dir", data.path])
        #expect(all.status == 0)
        // The line that is no record is shown too, marked (`tailShowsForeignLines`).
        #expect(all.stdout.split(separator: "\n").count == 4 && all.stdout.contains("?? not an event-log record: not json"))
        #expect(!all.stdout.contains("\u{1B}["))
        let byJTI = try await RiscBinary.run(["tail", "--data-dir", data.path, "--jti", "a"])
        #expect(byJTI.stdout.split(separator: "\n").count == 2)
        let rejected = try await RiscBinary.run(["tail", "--data-dir", data.path, "--outcome", "rejected", "--json"])
        #expect(rejected.stdout.trimmingCharacters(in: .newlines) == lines[1])
        let last = try await RiscBinary.run(["tail", "--data-dir", data.path, "-n", "1", "--subject", "s1"])
        #expect(last.stdout.contains("applied") && !last.stdout.contains("received"))
        #expect(try await RiscBinary.run(["tail", "--data-dir", data.path + "-missing"]).status != 0)
        // Issue 26 §10: an outcome no line can have is a usage error, not an empty answer with exit 0.
        let bogus = try await RiscBinary.run(["tail", "--data-dir", data.path, "--outcome", "bogus"])
        #expect(bogus.status == 64 && bogus.stderr.contains("no line has the outcome \"bogus\""), "\(bogus.status) \(bogus.stderr)")
    }

    /// Found: with risc's own rotation (the shipped configs: a segment a day), `risc tail --jti J`
    /// for an event of yesterday showed nothing, and `-n 20` just after a rotation showed the few
    /// lines since: tail read `events.log` alone. It goes back through the segments (and
    /// logrotate's files) still held until it has the lines asked for.
    @Test("tail reads back through the rotated segments and logrotate's files: -n over the whole log, --jti finds an event of an earlier segment, -n 0 shows all in order")
    func tailReadsRotatedFiles() async throws {
        let data = try Self.dataDirectory("rotated")
        let line = Self.receivedLine
        let files = [("events.log.1", [line(0, "oldest")]), ("events-000001.log", [line(1, "a"), line(2, "b")]), ("events-000002.log", [line(3, "c")]), ("events.log", [line(4, "d")])]
        for (name, lines) in files { try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: data.appendingPathComponent(name)) }
        func tail(_ options: [String]) async throws -> [String] {
            let result = try await RiscBinary.run(["tail", "--data-dir", data.path, "--json"] + options)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.split(separator: "\n").map(String.init)
        }
        #expect(try await tail(["-n", "3"]) == [line(2, "b"), line(3, "c"), line(4, "d")])
        #expect(try await tail(["--jti", "a"]) == [line(1, "a")])
        #expect(try await tail(["--jti", "oldest"]) == [line(0, "oldest")])
        #expect(try await tail(["-n", "0"]) == files.flatMap(\.1))
    }

    /// Found: `risc tail -n 0` (the whole log) and `risc tail --verify` (any `-n`) read each file
    /// whole into memory and held every shown line until the end: over a 132 MB log of 125,000
    /// SETs `-n 0 --json` peaked at 374 MB and `--verify` at 358 MB to print 20 lines, and a year
    /// of logs kept by `rotate -1` would take its size three times over on the receiver's own
    /// machine. They now read a chunk at a time, merge the files as they go and keep only the
    /// lines they still have to show.
    @Test("tail -n 0 and --verify read the log a chunk at a time: a 1.5 GB log (sparse) within a 1.2 GB address-space limit")
    func tailStreamsTheWholeLog() async throws {
        let data = try Self.dataDirectory("stream-sparse")
        let path = data.appendingPathComponent("events.log").path
        let line = Self.receivedLine
        try Data((line(1, "before") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 1_500 << 20)  // a hole of zeros, no newline in it: passed over, as `-n N` does
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(("\n" + line(2, "after") + "\n").utf8))
        try handle.close()
        for options in ["-n 0", "--verify -n 2"] {
            let result = try await RiscBinary.run(
                ["-c", "ulimit -v 1200000; exec \(RiscBinary.url.path) tail --data-dir \(data.path) --json \(options)"], executable: URL(fileURLWithPath: "/bin/sh"))
            let shown = result.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("{") }
            #expect(result.status == 0 && shown == [line(1, "before"), line(2, "after")], "tail \(options): status \(result.status) \(result.stdout.prefix(300)) \(result.stderr.prefix(300))")
        }
        // --verify sees such a run: inside a chained log it breaks the chain (a first version of
        // the streaming passed over it, and called the chain whole).
        let chained = data.appendingPathComponent("chained.log").path
        let log = try JSONLinesEventLog(path: chained, logID: "node-t")
        for index in 0..<3 { log.record(EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000 + Double(index))) }
        log.close()
        let written = try String(contentsOfFile: chained, encoding: .utf8).split(separator: "\n").map(String.init)
        try Data((written[..<2].joined(separator: "\n") + "\n" + String(repeating: "\u{0}", count: 2 << 20) + "\n" + written[2...].joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: chained))
        let checked = try await RiscBinary.run(["tail", "--verify", "--file", chained, "--json", "-n", "2"])
        #expect(checked.status == 0 && checked.stdout.hasPrefix("!! hash chain broken: bad_json at \(chained):3"), "\(checked.stdout.prefix(300))")
    }

    /// `--verify -n N` used to render every line of the log on the way to keep the last N (2.6
    /// million lines: 15.7 s against 4.5 for the chain check alone); it now reads them back from
    /// where the check ended, as `-n N` does. Pinned: the same lines as `-n N`, filtered or not,
    /// a last line without its newline among them.
    @Test("tail --verify -n N shows what tail -n N shows, after the chain's status")
    func verifiedLastLines() async throws {
        let data = try Self.dataDirectory("verify-last")
        let path = data.appendingPathComponent("events.log").path
        let log = try JSONLinesEventLog(path: path, logID: "node-v")
        for index in 0..<50 {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000 + Double(index))
            record["jti"] = .string("j\(index % 7)")
            log.record(record)
        }
        log.close()
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(Self.receivedLine(9, "j3").utf8))  // no newline after it
        try handle.close()
        for options in [["-n", "3"], ["-n", "4", "--jti", "j3"], ["-n", "2", "--jti", "j5"], ["-n", "100", "--jti", "j1"]] {
            let plain = try await RiscBinary.run(["tail", "--file", path, "--json"] + options)
            let checked = try await RiscBinary.run(["tail", "--verify", "--file", path, "--json"] + options)
            var lines = checked.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(checked.status == 0 && lines.removeFirst().hasPrefix("hash chain: whole from seq 0 to 50"), "\(checked.stdout.prefix(200))")
            #expect(lines.joined(separator: "\n") == plain.stdout && !plain.stdout.isEmpty, "\(options): \(checked.stdout) against \(plain.stdout)")
            // Found: a pipe (`--file <(…)`, `/dev/stdin`) cannot be read back from its end: `-n N`
            // failed with "NSCocoaErrorDomain Code=256", and `--verify -n N` too once it read back.
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let piped = try await RiscBinary.run(["tail", "--file", "/dev/stdin", "--json"] + options, stdin: text)
            #expect(piped.status == 0 && piped.stdout == plain.stdout, "\(options) piped: \(piped.stdout) \(piped.stderr)")
            let pipedChecked = try await RiscBinary.run(["tail", "--verify", "--file", "/dev/stdin", "--json"] + options, stdin: text)
            #expect(pipedChecked.status == 0 && pipedChecked.stdout == checked.stdout, "\(options) piped: \(pipedChecked.stdout) \(pipedChecked.stderr)")
        }
        let whole = try await RiscBinary.run(["tail", "--verify", "--file", "/dev/stdin", "-n", "0"], stdin: "{}\n")
        #expect(whole.status == 64 && whole.stderr.contains("--verify -n 0 reads /dev/stdin twice: give a file, not a pipe"), "\(whole.stderr)")
    }

    @Test("tail -n 0 over 40 MB in four files (one gzipped, one a command's) shows them merged by time with the memory of a few lines")
    func tailWholeLogInBoundedMemory() async throws {
        let data = try Self.dataDirectory("stream-rss")
        // Line n at second n of 2026 (its microseconds) in file n % 4: every file's lines are
        // interleaved in time with the others'.
        let names = ["events.log.2", "events.log.1", "events.log", "events.cli.log"]
        let count = 40_000
        let pad = String(repeating: "p", count: 900)
        func line(_ n: Int) -> String {
            #"{"v":1,"ts":"2026-01-01T00:00:00.\#(String(format: "%06d", n))Z","step":"received","outcome":"accepted","jti":"j\#(n)","pad":"\#(pad)"}"#
        }
        var texts = names.map { _ in "" }
        for n in 0..<count { texts[n % 4 == 3 ? 3 : [0, 1, 2][n % 4]] += line(n) + "\n" }
        // logrotate's files hold what came before the current one's: file order is time order there.
        let logLines = (0..<count).filter { $0 % 4 != 3 }
        texts[0] = logLines.prefix(logLines.count / 3).map(line).joined(separator: "\n") + "\n"
        texts[1] = logLines.dropFirst(logLines.count / 3).prefix(logLines.count / 3).map(line).joined(separator: "\n") + "\n"
        texts[2] = logLines.dropFirst(2 * (logLines.count / 3)).map(line).joined(separator: "\n") + "\n"
        for (name, text) in zip(names, texts) { try Data(text.utf8).write(to: data.appendingPathComponent(name)) }
        let gzip = try await RiscBinary.run(["-c", "gzip \(data.appendingPathComponent("events.log.2").path)"], executable: URL(fileURLWithPath: "/bin/sh"))
        try #require(gzip.status == 0, "\(gzip.stderr)")
        let small = try Self.dataDirectory("stream-rss-small")
        try Data((line(0) + "\n").utf8).write(to: small.appendingPathComponent("events.log"))
        func peak(_ directory: URL, _ output: URL) async throws -> Int {
            try await RiscBinary.peakMemory(["tail", "--data-dir", directory.path, "--json", "-n", "0"], output: output)
        }
        let baseline = try await peak(small, small.appendingPathComponent("out"))
        let output = data.appendingPathComponent("out")
        let used = try await peak(data, output)
        let shown = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(shown.count == count && shown.first == line(0) && shown.last == line(count - 1) && shown == (0..<count).map(line), "\(shown.count) lines shown")
        #expect(used - baseline < 16 << 10, "peak \(used) KiB against \(baseline) KiB for one line: the log was held in memory")
    }

    /// A new data directory for a tail test.
    static func dataDirectory(_ name: String) throws -> URL {
        let data = Scratch.root.appendingPathComponent("risc-tail-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        return data
    }

    /// An event-log line of a SET received at second `second` of 2026.
    static func receivedLine(_ second: Int, _ jti: String) -> String {
        #"{"v":1,"ts":"2026-01-01T00:00:0\#(second).000000Z","step":"received","outcome":"accepted","jti":"\#(jti)"}"#
    }

    /// Found: a rotated file tail could not read was passed over with a warning by `-n 0`, but
    /// failed the whole command under `-n N` (a damaged `.gz`), so an operator's everyday
    /// `risc tail` showed nothing at all because of one old file. Both now show what they can
    /// and name the file they could not read.
    @Test("tail shows what it can read when a rotated file is damaged, and names that file, with -n N and -n 0 alike")
    func tailPassesOverDamagedRotatedFile() async throws {
        let data = try Self.dataDirectory("damaged")
        let line = Self.receivedLine
        try Data("not gzip at all".utf8).write(to: data.appendingPathComponent("events.log.2.gz"))
        try Data((line(1, "a") + "\n").utf8).write(to: data.appendingPathComponent("events.log.1"))
        try Data((line(2, "b") + "\n").utf8).write(to: data.appendingPathComponent("events.log"))
        for lines in ["5", "0"] {
            let result = try await RiscBinary.run(["tail", "--data-dir", data.path, "--json", "-n", lines])
            #expect(result.status == 0, "-n \(lines): \(result.stderr)")
            #expect(result.stdout.split(separator: "\n").map(String.init) == [line(1, "a"), line(2, "b")], "-n \(lines)")
            #expect(result.stderr.contains("cannot read \(data.appendingPathComponent("events.log.2.gz").path)"), "-n \(lines): \(result.stderr)")
            #expect(result.stderr.contains("gzip"), "-n \(lines): \(result.stderr)")
        }
    }

    /// Found: `risc accounts unlink` beside a running receiver writes its `site` line to
    /// `events.cli.log` (one writer a file keeps each hash chain whole), and `risc tail` read
    /// `events.log` only, so the operator's own unlink never showed where operations.md says
    /// `risc tail` shows who unlinked what.
    @Test("tail shows what the commands wrote beside a running receiver (events.cli.log), with the receiver's lines")
    func tailShowsCommandLines() async throws {
        let (process, data, _, _) = try await ServeCommandTests.startServe()
        defer { try? FileManager.default.removeItem(at: data) }
        let linked = try await RiscBinary.run(["accounts", "link", "--subject", "s-tail", "--user", "u-tail", "--data-dir", data.path])
        let unlinked = try await RiscBinary.run(["accounts", "unlink", "s-tail", "--data-dir", data.path])
        let shown = try await RiscBinary.run(["tail", "--data-dir", data.path, "--subject", "s-tail", "--json"])
        process.terminate()
        await process.exited()
        #expect(linked.status == 0 && unlinked.status == 0, "\(linked.stderr) \(unlinked.stderr)")
        #expect(unlinked.stderr.contains("events.cli.log"), "\(unlinked.stderr)")
        #expect(shown.status == 0 && shown.stdout.contains(#""step":"site","outcome":"unlinked","source":"cli""#), "\(shown.stdout) \(shown.stderr)")
    }

    /// `risc tail --json -n LINES --follow` on the data directory `data`, its output in a file there.
    static func follow(_ data: URL, lines: Int) throws -> (process: ChildProcess, output: URL) {
        let output = data.appendingPathComponent("tail.out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let follow = ChildProcess()
        follow.executableURL = RiscBinary.url
        follow.arguments = ["tail", "--data-dir", data.path, "--json", "-n", "\(lines)", "--follow"]
        follow.standardOutput = try FileHandle(forWritingTo: output)
        try follow.run()
        return (follow, output)
    }

    // Found: `risc tail -f` beside a receiver rotating its log (risc's segments, 4 KiB here) showed
    // 19 of 30 SETs: it looked for a new file only once the old one had nothing more for it, so the
    // lines written to the old file between its last read and the rotation, and every file rotated
    // in between, were never shown; after a logrotate move, the lines the receiver wrote to the
    // moved file until SIGHUP reached it were lost too.
    @Test("--follow across rotations between two reads: the rest of the moved file, every file rotated since, the new one; lines written to a moved file after the switch")
    func followAcrossRotations() async throws {
        let data = Scratch.root.appendingPathComponent("risc-tail-rotate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        let log = data.appendingPathComponent("events.log")
        func line(_ n: Int) -> String { #"{"v":1,"ts":"2026-01-01T00:00:00.000000Z","step":"received","outcome":"accepted","jti":"line-\#(n)"}"# }
        func append(_ numbers: ClosedRange<Int>, to file: URL) throws {
            if !FileManager.default.fileExists(atPath: file.path) { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(numbers.map { line($0) + "\n" }.joined().utf8))
            try handle.close()
        }
        try append(1...1, to: log)
        let (follow, output) = try Self.follow(data, lines: 0)
        defer { follow.terminate() }
        func shown() -> Set<String> { Set(((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)) }
        #expect(await waitWhile(upTo: 120, every: 0.05) { !shown().contains(line(1)) })

        // risc's rotation twice in one go: lines into the file, moved to a segment, a new file, again.
        try append(2...4, to: log)
        let moved = try FileHandle(forWritingTo: log)  // the writer's descriptor, as logrotate leaves it below
        try FileManager.default.moveItem(at: log, to: data.appendingPathComponent("events-000001.log"))
        try append(5...7, to: log)
        try FileManager.default.moveItem(at: log, to: data.appendingPathComponent("events-000002.log"))
        try append(8...9, to: log)
        #expect(await waitWhile(upTo: 120, every: 0.05) { !shown().isSuperset(of: (1...9).map(line)) }, "\(shown().count) of 9 lines shown")
        // A line the receiver writes to a moved file before its SIGHUP (logrotate's move, then the signal).
        try moved.seekToEnd()
        try moved.write(contentsOf: Data((line(10) + "\n").utf8))
        try moved.close()
        try append(11...11, to: log)
        #expect(await waitWhile(upTo: 120, every: 0.05) { !shown().isSuperset(of: (1...11).map(line)) }, "\(shown().count) of 11 lines shown")
        follow.terminate()
        await follow.exited()
        #expect(shown().count == 11)
    }

    @Test("tail merges events.log with the commands' files by time, -n over all of them; --follow reads a file that appears later")
    func tailMergesAndFollows() async throws {
        let data = Scratch.root.appendingPathComponent("risc-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        func line(_ second: Int, _ step: String, _ outcome: String, _ subject: String) -> String {
            #"{"v":1,"ts":"2026-01-01T00:00:0\#(second).000000Z","step":"\#(step)","outcome":"\#(outcome)","subject":"\#(subject)"}"#
        }
        let receiver = [line(0, "received", "accepted", "a"), line(3, "applied", "applied", "a")]
        let cli = [line(1, "site", "unlinked", "b")]
        let replay = [line(2, "received", "accepted", "c"), line(4, "applied", "applied", "c")]
        for (name, lines) in [("events.log", receiver), ("events.cli.log", cli), ("events.replay.log", replay)] {
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: data.appendingPathComponent(name))
        }
        let all = try await RiscBinary.run(["tail", "--data-dir", data.path, "--json", "-n", "0"])
        #expect(all.stdout == [receiver[0], cli[0], replay[0], receiver[1], replay[1]].joined(separator: "\n") + "\n", "\(all.stdout)")
        let last = try await RiscBinary.run(["tail", "--data-dir", data.path, "--json", "-n", "2"])
        #expect(last.stdout == [receiver[1], replay[1]].joined(separator: "\n") + "\n", "\(last.stdout)")
        // --file reads that file alone.
        let one = try await RiscBinary.run(["tail", "--file", data.appendingPathComponent("events.log").path, "--json", "-n", "0"])
        #expect(one.stdout == receiver.joined(separator: "\n") + "\n")

        try FileManager.default.removeItem(at: data.appendingPathComponent("events.cli.log"))
        let (follow, output) = try Self.follow(data, lines: 1)
        defer { follow.terminate() }
        func shown() -> String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
        // Up to two minutes for each line to show: the suite's other tests share the two cores.
        func waitFor(_ wanted: String) async throws {
            for _ in 0..<2_400 where !shown().contains(wanted) { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await waitFor(replay[1])
        let later = line(5, "site", "unlinked", "d")
        try Data((later + "\n").utf8).write(to: data.appendingPathComponent("events.cli.log"))
        try await waitFor(later)
        let appended = line(6, "received", "accepted", "e")
        let handle = try FileHandle(forWritingTo: data.appendingPathComponent("events.log"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((appended + "\n").utf8))
        try handle.close()
        try await waitFor(appended)
        follow.terminate()
        await follow.exited()
        #expect(shown() == [replay[1], later, appended].joined(separator: "\n") + "\n", "\(shown())")
    }

    /// Found: a line of the log that is not an event-log record (a damaged or hand-edited file, a
    /// JSON object another tool appended) was shown as an empty row, or not at all: `tail` hid the
    /// very lines an operator would look for. They are shown as they are (escaped), marked, in
    /// their place; `--json` keeps its output JSON and says on standard error what it left out.
    @Test("tail shows a line that is not an event-log record as it is, marked and escaped, in its place; --json leaves it out and says so")
    func tailShowsForeignLines() async throws {
        let data = Scratch.root.appendingPathComponent("risc-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        let first = #"{"v":1,"ts":"2026-01-01T00:00:01.000000Z","step":"received","outcome":"accepted","jti":"one"}"#
        let last = #"{"v":1,"ts":"2026-01-01T00:00:02.000000Z","step":"received","outcome":"accepted","jti":"two"}"#
        try Data([first, "half a line \u{1B}[2J", #"{"foo":1}"#, last].joined(separator: "\n").utf8 + [0x0A]).write(to: data.appendingPathComponent("events.log"))
        // Another file beside it, so that the lines are merged by time.
        try Data((#"{"v":1,"ts":"2026-01-01T00:00:00.000000Z","step":"site","outcome":"unlinked","subject":"s"}"# + "\n").utf8)
            .write(to: data.appendingPathComponent("events.cli.log"))
        let shown = try await RiscBinary.run(["tail", "--data-dir", data.path, "-n", "0"])
        let rows = shown.stdout.split(separator: "\n").map(String.init)
        #expect(rows.count == 5, "\(shown.stdout)")
        #expect(rows.count == 5 && rows[1].contains("jti=one") && rows[4].contains("jti=two"), "\(shown.stdout)")
        #expect(rows.count == 5 && rows[2].contains("not an event-log record") && rows[2].contains("half a line \\x1b[2J"), "\(shown.stdout)")
        #expect(rows.count == 5 && rows[3].contains("not an event-log record") && rows[3].contains(#"{"foo":1}"#), "\(shown.stdout)")
        #expect(!shown.stdout.unicodeScalars.contains { $0.value == 0x1B })
        // Filtered, they do not match.
        #expect(try await RiscBinary.run(["tail", "--data-dir", data.path, "--jti", "two"]).stdout.split(separator: "\n").count == 1)
        let json = try await RiscBinary.run(["tail", "--file", data.appendingPathComponent("events.log").path, "--json", "-n", "0"])
        #expect(json.stdout == first + "\n" + last + "\n", "\(json.stdout)")
        #expect(json.stderr.contains("2 lines") && json.stderr.contains("not event-log records"), "\(json.stderr)")
    }

    @Test("tail's human output escapes control characters from what clients sent (no screen clearing, no bidi tricks)")
    func tailEscapesControlCharacters() async throws {
        let data = Scratch.root.appendingPathComponent("risc-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        // As risc writes them: JSON escapes in the file, control characters once decoded.
        let line =
            #"{"v":1,"ts":"2026-01-01T00:00:00.000000Z","step":"received","outcome":"rejected","err":"invalid_request","description":"algorithm '\u001b[2J\u001b[1;1H' is not allowed","remote":"203.0.113.9\u202e","path":"/x\u0007"}"#
        try Data((line + "\n").utf8).write(to: data.appendingPathComponent("events.log"))
        let shown = try await RiscBinary.run(["tail", "--data-dir", data.path])
        #expect(shown.status == 0)
        #expect(!shown.stdout.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0.value == 0x202E || $0.value == 0x7F })
        #expect(shown.stdout.contains("\\x1b[2J"))
        #expect(shown.stdout.contains("\\u{202e}"))
    }

    /// Found: a port another process held gave `Error Domain=NSPOSIXErrorDomain Code=98 "Address
    /// already in use"`, naming neither the port nor what to do.
    @Test("dev-issuer on a port another process holds says which port and why, and exits non-zero")
    func devIssuerPortTaken() async throws {
        let (fd, port) = try PostgresCluster.boundLoopbackSocket()
        defer { close(fd) }
        #expect(listen(fd, 4) == 0)
        let result = try await RiscBinary.run(["dev-issuer", "--keys", "keys/test", "--port", "\(port)"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot listen on 127.0.0.1:\(port): the port is in use (another process listens there)"), "\(result.stderr)")
    }

    @Test("dev-issuer serves the test keys so verification through discovery works offline")
    func devIssuer() async throws {
        // Port 0: the issuer says where it listens (a port picked beforehand may be taken meanwhile).
        let output = Scratch.root.appendingPathComponent("risc-dev-issuer-\(UUID().uuidString).out")
        #expect(FileManager.default.createFile(atPath: output.path, contents: nil))
        defer { try? FileManager.default.removeItem(at: output) }
        let process = ChildProcess()
        process.executableURL = RiscBinary.url
        process.currentDirectoryURL = RiscBinary.repository
        process.arguments = ["dev-issuer", "--port", "0"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        try process.run()
        defer { process.terminate() }
        func announced() -> String? {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").first { $0.hasPrefix("discovery: ") }.map { String($0.dropFirst("discovery: ".count)) }
        }
        #expect(await waitWhile { announced() == nil && process.isRunning })
        let discovery = try #require(announced(), "dev-issuer did not say where it listens")
        var up = false
        for _ in 0..<50 where !up {
            up = (try? await CurlHTTPClient.patient().perform(HTTPRequest(url: discovery)))?.status == 200
            if !up { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(up)
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let result = try await RiscBinary.run(
            ["verify", "-", "--discovery-url", discovery, "--issuer", SETFactory.defaultIssuer, "--audience", SETFactory.defaultAudience],
            stdin: token)
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    }
}
