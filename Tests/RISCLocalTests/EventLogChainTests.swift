import Foundation
import RISCCore
import RISCTestKit
import Testing

@testable import RISCLocal

/// Issue 28: the event log's hash chain, written by `JSONLinesEventLog` and checked by
/// `EventLogVerifier`, tampered with as an insider would.
@Suite("Event log hash chain")
struct EventLogChainTests {
    let directory: String
    var path: String { directory + "/events.log" }

    init() throws {
        directory = Scratch.root.appendingPathComponent("risc-chain-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// Writes `count` records through a writer on `path`, then closes it.
    func write(_ count: Int, jti: String = "j", to path: String? = nil) throws {
        let log = try JSONLinesEventLog(path: path ?? self.path, logID: "node-a")
        for index in 0..<count {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000 + Double(index))
            record["jti"] = .string("\(jti)-\(index)")
            log.record(record)
        }
        log.close()
    }

    func lines(_ path: String? = nil) throws -> [String] {
        try String(contentsOfFile: path ?? self.path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    func rewrite(_ lines: [String], _ path: String? = nil) throws {
        try lines.joined(separator: "\n").write(toFile: path ?? self.path, atomically: false, encoding: .utf8)
    }

    func verify() throws -> EventLogVerifier.Summary { try EventLogVerifier.verify(files: EventLogVerifier.files(of: path)) }

    // Finding: the flusher's thread held the log itself, so a log let go without `close()` was
    // never deinitialized: its lines stayed in the buffer until the next flush, and its thread,
    // its file and its lock until the process ended (a second writer on the path was refused,
    // `Busy`).
    @Test("a log let go without close() is closed: its lines are written and the next writer takes the file")
    func releasedLogCloses() throws {
        weak var released: JSONLinesEventLog?
        do {
            // A flush interval far past the test's length: only a close writes the lines.
            let log = try JSONLinesEventLog(path: path, flushInterval: 3_600, logID: "node-a")
            released = log
            for jti in ["let-go-1", "let-go-2"] {
                var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000)
                record["jti"] = .string(jti)
                log.record(record)
            }
        }
        #expect(released == nil)
        // The default tries, not one: a child that another test's thread is spawning right now can
        // share the closed file's lock until its `exec` (see `LockWait`); the old log held it until
        // the process ended.
        let next = try JSONLinesEventLog(path: path, logID: "node-a")
        next.close()
        let written = try lines().filter { $0.contains("let-go-") }
        #expect(written.count == 2)
        #expect(try verify().problem == nil)
    }

    @Test("a new log starts with its genesis line; every line carries seq and prev; the chain verifies")
    func genesis() throws {
        try write(5)
        let all = try lines().dropLast()  // the file ends with a newline
        #expect(all.count == 6)
        let first = try JSONParser.parseObject(Array(all[0].utf8))
        #expect(first["step"] == "log" && first["outcome"] == "genesis" && first["log_id"] == "node-a" && first["seq"] == 0)
        #expect(first["prev"] == .string(Base64URL.encodeStandard(EventLogChain.origin)))
        let second = try JSONParser.parseObject(Array(all[1].utf8))
        #expect(second["seq"] == 1 && second["prev"] == .string(Base64URL.encodeStandard(EventLogChain.leafHash(Array(all[0].utf8)))))
        let summary = try verify()
        #expect(summary.problem == nil && summary.lines == 6 && summary.firstSeq == 0 && summary.lastSeq == 5 && summary.logID == "node-a")
    }

    @Test("the chain goes on across restarts, logrotate's moves (plain and compressed) and a restart after one")
    func resumes() throws {
        try write(3)
        try write(2)  // a restart: no second genesis
        let log = try JSONLinesEventLog(path: path, logID: "node-a")
        log.record(EventLogRecord(step: .serve, outcome: .started, time: 1))
        log.settle()
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        log.reopen()  // SIGHUP after logrotate
        log.record(EventLogRecord(step: .serve, outcome: .stopped, time: 2))
        log.close()
        try FileManager.default.moveItem(atPath: path + ".1", toPath: path + ".2")
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        try write(1)  // started with events.log moved away: goes on from events.log.1
        var summary = try verify()
        #expect(summary.problem == nil && summary.lines == 9 && summary.lastSeq == 8, "\(String(describing: summary.problem))")
        #expect(try lines().first.map { try JSONParser.parseObject(Array($0.utf8))["seq"] } == 8)
        // Compressed, as logrotate leaves older files.
        let gzip = ChildProcess()
        gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
        gzip.arguments = [path + ".2"]
        try gzip.run()
        gzip.waitUntilExit()
        #expect(EventLogVerifier.files(of: path).map { ($0 as NSString).lastPathComponent } == ["events.log.2.gz", "events.log.1", "events.log"])
        summary = try verify()
        #expect(summary.problem == nil && summary.lines == 9)
    }

    @Test("an insider's edits break the chain where they are: a changed value, a deleted line, two lines swapped, a line that is not JSON")
    func tampering() throws {
        try write(6)
        let original = try lines()

        var edited = original
        edited[3] = edited[3].replacingOccurrences(of: "\"j-2\"", with: "\"j-X\"")
        try rewrite(edited)
        var problem = try #require(try verify().problem)
        #expect(problem.reason == .prevMismatch && problem.line == 5 && problem.seq == 4)

        edited = original
        edited.remove(at: 2)
        try rewrite(edited)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .seqGap && problem.line == 3 && problem.seq == 3)

        edited = original
        edited.swapAt(2, 3)
        try rewrite(edited)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .seqGap && problem.line == 3)

        edited = original
        edited[4] = String(edited[4].dropFirst())
        try rewrite(edited)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .badJSON && problem.line == 5)

        // Lines moved back after the ones that followed them: seq goes back.
        edited = original
        edited.insert(edited[1], at: 4)
        try rewrite(edited)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .seqRegress && problem.line == 5)

        // A seq no counter reaches is an error, never a trap: in the verifier, and at a start.
        edited = original
        edited[6] = edited[6].replacingOccurrences(of: #""seq":6"#, with: #""seq":1e30"#)
        try rewrite(edited)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .badJSON && problem.line == 7)
        try write(1)
        #expect(try verify().problem?.reason == .badJSON)

        // A new genesis in the middle (the log restarted by hand) is a break, not a new start.
        try rewrite(original)
        try write(2, to: directory + "/other.log")
        let other = try lines(directory + "/other.log")
        try rewrite(Array(original.dropLast()) + other)
        problem = try #require(try verify().problem)
        #expect(problem.reason == .seqRegress && problem.line == 8 && problem.seq == 0)
    }

    @Test("a torn last line (kill -9 mid-write) is reported, not tampering; the next start ends it, names it, and the chain goes on")
    func torn() throws {
        try write(3)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"v":1,"ts":"2026-11-25T00:00:00Z","step":"rece"#.utf8))
        try handle.close()
        var summary = try verify()
        #expect(summary.problem == nil && summary.torn.count == 1 && summary.lines == 4)

        try write(2)
        summary = try verify()
        #expect(summary.problem == nil && summary.torn.count == 1 && summary.lines == 7 && summary.lastSeq == 6, "\(String(describing: summary.problem))")
        let all = try lines()
        #expect(all[4].hasSuffix(#""step":"rece"#))
        let said = try JSONParser.parseObject(Array(all[5].utf8))
        #expect(said["outcome"] == "torn" && said["bytes"] == .number(Double(all[4].utf8.count)))

        // A torn line not said so by the next one is not JSON: tampering.
        var edited = all
        edited.remove(at: 5)
        try rewrite(edited)
        let problem = try #require(try verify().problem)
        #expect(problem.reason == .badJSON && problem.line == 5)
    }

    // Found: logrotate's `dateext` (the default in Fedora's, RHEL's and SUSE's logrotate.conf, so in
    // force for deploy/risc.logrotate there) names a moved log `events.log-20261205`, then
    // `.gz`: risc knew only `events.log.N`. `risc log verify` read `events.log` alone ("starts at seq
    // N, not at the log's genesis"), and a start right after a rotation found no chain to go on
    // from and began a second genesis.
    @Test("logrotate's dateext names (events.log-YYYYMMDD, its dateformat's variants, .gz): read oldest first, and a start right after a move goes on from the newest")
    func dateext() throws {
        let summary = try rotated(into: ["events.log-20261130.gz", "events.log-20261204-1796400000.gz", "events.log-20261205-1796500000"])
        #expect(summary.logID == "node-a", "one genesis, read from the first file")
    }

    /// Two lines, then the log moved to each of `names` in turn (logrotate's moves; gzipped where
    /// the name ends `.gz`), `index + 1` lines written after each move by a writer started with the
    /// log moved away (it goes on from the newest moved file); the files found in that order, and
    /// read as one chain.
    func rotated(into names: [String]) throws -> EventLogVerifier.Summary {
        try write(2)
        for (index, name) in names.enumerated() {
            try FileManager.default.moveItem(atPath: path, toPath: directory + "/" + name.replacingOccurrences(of: ".gz", with: ""))
            try write(index + 1)
        }
        for name in names where name.hasSuffix(".gz") {
            let gzip = ChildProcess()
            gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
            gzip.arguments = [directory + "/" + name.replacingOccurrences(of: ".gz", with: "")]
            try gzip.run()
            gzip.waitUntilExit()
        }
        #expect(EventLogVerifier.files(of: path).map { ($0 as NSString).lastPathComponent } == names + ["events.log"])
        let summary = try verify()
        #expect(summary.problem == nil && summary.firstSeq == 0 && summary.lines == 1 + 2 + names.count * (names.count + 1) / 2, "\(String(describing: summary.problem))")
        return summary
    }

    // Found: with `dateformat .%Y%m%d` (or `.%s`) logrotate's dated names look like its numbered
    // ones (`events.log.20261204`), and were read as numbers, highest oldest: newest first, so
    // `risc log verify` said "seq_regress" of a whole log, and a start that signs checkpoints made
    // none. A number of more than six digits is a date or a time: it sorts as text, oldest first.
    @Test("logrotate's dateformat .%Y%m%d names read oldest first, after any numbered files")
    func dottedDates() throws {
        _ = try rotated(into: ["events.log.3", "events.log.20261203.gz", "events.log.20261204"])
    }

    // Found (deploy/risc.logrotate run by logrotate): SIGHUP's own "config reloaded" line went to
    // the moved file or the new one as the flusher's timing fell: a reopen took effect at the
    // flusher's next pass, for every line waiting then, those recorded after the SIGHUP too.
    @Test("lines recorded before reopen() go to the moved file, those after it to the new one, every time")
    func reopenBoundary() throws {
        let log = try JSONLinesEventLog(path: path, logID: "node-a")
        for round in 1...20 {
            log.record(EventLogRecord(step: .serve, outcome: .started, time: Double(round)))
            try FileManager.default.moveItem(atPath: path, toPath: path + ".\(21 - round)")  // logrotate's numbers: .1 the newest
            log.reopen()
            log.record(EventLogRecord(step: .config, outcome: .reloaded, time: Double(round)))
            log.settle()
        }
        log.close()
        for round in 1...20 {
            let outcomes = try lines(path + ".\(21 - round)").filter { !$0.isEmpty }.map { try JSONParser.parseObject(Array($0.utf8))["outcome"] }
            #expect(outcomes.last == "started" && outcomes.first == (round == 1 ? "genesis" : "reloaded"), "\(round): \(outcomes)")
        }
        #expect(try lines().filter { !$0.isEmpty }.count == 1)
        #expect(try verify().problem == nil)
    }

    @Test("a torn last line, then logrotate before the restart: the new file's first line names it, and the chain verifies across the files")
    func tornThenRotated() throws {
        try write(3)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"v":1,"ts":"2026-11-25T00:00:00Z","st"#.utf8))
        try handle.close()
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        try write(2)
        let first = try JSONParser.parseObject(Array(try #require(try lines().first).utf8))
        #expect(first["outcome"] == "torn" && first["seq"] == 4)
        let summary = try verify()
        #expect(summary.problem == nil && summary.torn.count == 1 && summary.lastSeq == 6, "\(String(describing: summary.problem))")
    }

    @Test("a last line whole but for its newline is ended by the next start, with no torn line")
    func missingNewline() throws {
        try write(2)
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text.removeLast()
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        try write(1)
        let summary = try verify()
        #expect(summary.problem == nil && summary.torn.isEmpty && summary.lines == 4)
    }

    @Test("lines from before the chain are counted apart; the chain starts with a genesis after them")
    func unchainedPrefix() throws {
        try #"{"v":1,"ts":"2026-01-01T00:00:00Z","step":"serve","outcome":"started"}"#.appending("\n").write(toFile: path, atomically: false, encoding: .utf8)
        try write(2)
        let summary = try verify()
        #expect(summary.problem == nil && summary.unchained == 1 && summary.lines == 3 && summary.firstSeq == 0)
    }

    @Test("one writer a file: a second writer on the same log is refused (its chain would interleave)")
    func oneWriter() throws {
        let first = try JSONLinesEventLog(path: path)
        defer { first.close() }
        #expect(throws: JSONLinesEventLog.Busy.self) { _ = try JSONLinesEventLog(path: path) }
    }

    @Test("waiting for the lines from many threads while the flusher writes: the lines stay in the chain's order")
    func waitingKeepsOrder() throws {
        let log = try JSONLinesEventLog(path: path, flushInterval: 0.001, logID: "node-a")
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<1_000 { Self.record(log, ["t\(thread)-\(index)"]) }
        }
        log.close()
        let summary = try verify()
        #expect(summary.problem == nil && summary.lines == 4_001, "\(String(describing: summary.problem)), \(summary.lines) lines")
    }

    @Test("the file cannot be opened again after logrotate moved it: the lines wait in memory and are written, chained, once it can")
    func waitsForTheFile() throws {
        let log = try JSONLinesEventLog(path: path, logID: "node-a")
        Self.record(log, ["before"])
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)  // in the way: open fails
        log.reopen()
        log.settle()  // the reopen is done (and failed) before the next line: it cannot go to the moved file
        Self.record(log, ["while-in-the-way"])
        try FileManager.default.removeItem(atPath: path)
        Self.record(log, ["after"])  // the next pass opens the file: no second SIGHUP needed
        log.close()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(#""jti":"while-in-the-way""#) && text.contains(#""jti":"after""#), "\(text)")
        #expect(!(try String(contentsOfFile: path + ".1", encoding: .utf8)).contains(#""jti":"while-in-the-way""#))
        let summary = try verify()
        #expect(summary.problem == nil && summary.lines == 4, "\(String(describing: summary.problem)), \(summary.lines) lines")
    }

    /// Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN, as CI runs here): the
    /// full-disk tests need a file system of their own to fill.
    static let canMount: Bool = {
        guard geteuid() == 0 else { return false }
        let probe = Scratch.root.appendingPathComponent("risc-mount-\(UUID().uuidString)").path
        guard (try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: false)) != nil else { return false }
        defer { rmdir(probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=4k") == 0 else { return false }
        umount2(probe, Int32(MNT_DETACH))
        return true
    }()

    /// A 64 KiB tmpfs mounted at `directory/full` holding the log: one line written, the rest of
    /// the file system filled by a filler file, then 40 lines recorded (more than the log's last
    /// page holds: a write cut short, then none). `body` gets the log, its path and the filler's;
    /// then the tmpfs is unmounted.
    func onAFullDisk(_ body: (_ log: JSONLinesEventLog, _ path: String, _ filler: String) throws -> Void) throws {
        let mountPoint = directory + "/full"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        try #require(mount("tmpfs", mountPoint, "tmpfs", 0, "size=64k,mode=0700") == 0, "mount: errno \(errno)")
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        let (path, filler) = (mountPoint + "/events.log", mountPoint + "/filler")
        let log = try JSONLinesEventLog(path: path, logID: "node-a")
        Self.record(log, ["before-0"])
        try fill(filler)
        Self.record(log, (0..<40).map { "full-\($0)" })
        try body(log, path, filler)
    }

    /// Records a line for each of `jtis` and waits for the flusher's pass.
    static func record(_ log: JSONLinesEventLog, _ jtis: [String]) {
        for jti in jtis {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000)
            record["jti"] = .string(jti)
            log.record(record)
        }
        log.settle()
    }

    /// Fills the file system of `path` up: the filler takes every page left.
    func fill(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let page = [UInt8](repeating: 0, count: 4_096)
        while page.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) > 0 {}
        #expect(errno == ENOSPC)
    }

    @Test("a full disk: the lines wait in memory, and once there is room they are written, whole and in the chain's order", .enabled(if: canMount))
    func fullDisk() throws {
        try onAFullDisk { log, path, filler in
            let held = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!held.contains(#""jti":"full-39""#))
            try FileManager.default.removeItem(atPath: filler)
            Self.record(log, ["after-0"])
            log.close()
            let summary = try EventLogVerifier.verify(files: [path])
            #expect(summary.problem == nil && summary.torn.isEmpty && summary.lines == 43, "\(String(describing: summary.problem)), \(summary.lines) lines")
        }
    }

    @Test("a full disk cut a line short, then logrotate moved the file: the line is ended in the moved file before the new one starts", .enabled(if: canMount))
    func fullDiskThenReopen() throws {
        try onAFullDisk { log, path, filler in
            let cut = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!cut.hasSuffix("\n"), "the disk filled up mid-line")
            try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
            log.reopen()  // SIGHUP after logrotate, the disk still full
            log.settle()
            try FileManager.default.removeItem(atPath: filler)
            Self.record(log, ["after-0"])
            log.close()
            let summary = try EventLogVerifier.verify(files: [path + ".1", path])
            #expect(summary.problem == nil && summary.torn.isEmpty && summary.lines == 43, "\(String(describing: summary.problem)), \(summary.lines) lines")
        }
    }
}
