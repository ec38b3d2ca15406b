import Foundation
import RISCCore
import RISCTestKit
import Synchronization
import Testing

@testable import RISCLocal

/// Issue 28, segments: risc rotates the event log itself (by size or age, on an injected clock),
/// each closed segment gets a signed digest chained to the one before, retention deletes old
/// segments' files and the next digest says so, and `EventLogSegments.verify` finds an insider's
/// deleted segment or digest, a segment rewritten to a shorter chain, and a digest re-signed with
/// another key.
@Suite("Event log segments and digests")
struct EventLogSegmentTests {
    let directory: String
    let key: CheckpointKey
    var path: String { directory + "/events.log" }
    var verifier: CheckpointVerifier { try! CheckpointVerifier(key.verifierKey) }

    final class Clock: Sendable {
        let value = Mutex(1_800_000_000.0)
        var now: Double { value.withLock { $0 } }
        func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
    }

    init() throws {
        directory = Scratch.root.appendingPathComponent("risc-segments-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        key = try CheckpointKey.generate(name: "test-log").key
    }

    func writer(_ clock: Clock, interval: Double = 3_600, retention: Double = 0, maxBytes: Int64 = 0) throws -> JSONLinesEventLog {
        try JSONLinesEventLog(
            path: path, logID: "node-a",
            checkpoints: .init(key: key, interval: 60), segments: .init(maxBytes: maxBytes, interval: interval, retention: retention, key: key),
            clock: { clock.now })
    }

    /// Writes `count` lines, one settled pass each hour of the clock: a segment an hour.
    func hours(_ log: JSONLinesEventLog, _ clock: Clock, _ count: Int, from first: Int = 0) {
        for index in first..<(first + count) {
            log.record(Self.record("j\(index)", at: clock.now))
            log.settle()
            clock.advance(3_600)
            log.settle()
        }
    }

    static func record(_ jti: String, at time: Double) -> EventLogRecord {
        var record = EventLogRecord(step: .received, outcome: .accepted, time: time)
        record["jti"] = .string(jti)
        return record
    }

    /// Every file of the log's directory and the lines of its log files: what a failure shows.
    static func listing(_ path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted().map { name in
            let text = name.hasSuffix(".log") ? (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "(unreadable)" : ""
            return "\n== \(name)\n\(text)"
        }.joined()
    }

    func audit() throws -> EventLogAudit {
        try EventLogAudit.run(
            path: path, key: verifier, checkpointNote: String(data: FileManager.default.contents(atPath: directory + "/events.checkpoint")!, encoding: .utf8),
            trustedNote: nil)
    }

    /// Found with `events.resume`: with segments a start still read the file being written from the
    /// newest digest (with `event_log_rotate_interval` alone, up to a day of lines) when the state of
    /// the last checkpoint, in that same file, was newer. The state comes first now; a rotation since
    /// (another file) leaves the digest's way.
    @Test("with segments, a start goes on from the last checkpoint's state in the file being written, not from the newest digest")
    func resumesPastTheDigest() throws {
        let clock = Clock()
        var log = try writer(clock)
        hours(log, clock, 2)
        for index in 0..<3 { log.record(Self.record("same-hour-\(index)", at: clock.now)) }
        log.close()
        #expect(!EventLogSegments.discover(path).isEmpty)
        // A line of the file being written, before the state's offset, edited in place: not read.
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text.replaceSubrange(try #require(text.range(of: "same-hour-0")), with: "same-hour-X")
        let file = try #require(FileHandle(forWritingAtPath: path))
        try file.write(contentsOf: Data(text.utf8))
        try file.close()
        log = try writer(clock)
        log.record(Self.record("after", at: clock.now))
        log.close()
        let lines = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!lines.contains("no checkpoints"), "\(Self.listing(path))")
    }

    @Test("rotated every hour: segments with signed, chained digests; the chain and checkpoints go on across them and a restart")
    func rotation() throws {
        let clock = Clock()
        var log = try writer(clock)
        hours(log, clock, 3)
        log.close()
        log = try writer(clock)  // a restart: the chain goes on from the newest digest
        hours(log, clock, 2, from: 3)
        log.close()
        let found = EventLogSegments.discover(path)
        #expect(found.keys.sorted() == Array(1...5), "\(found.keys.sorted())")
        #expect(found.values.allSatisfy { $0.log != nil && $0.digest != nil })
        let second = try EventLogSegmentDigest.parse(String(contentsOfFile: try #require(found[2]?.digest), encoding: .utf8), key: verifier)
        #expect(second.number == 2 && second.previous != nil && second.origin == "risc-event-log-segment/node-a")
        let result = try audit()
        #expect(result.result == .verified, "\(String(describing: result.summary.problem)) \(String(describing: result.checkpointProblem))")
        #expect(result.summary.logID == "node-a")
        let lines = try EventLogSegments.files(of: path).map { try String(contentsOfFile: $0, encoding: .utf8) }.joined()
        #expect(lines.contains(#""outcome":"rotated","segment":1"#))
        for index in 0..<5 { #expect(lines.contains(#""jti":"j\#(index)""#)) }
    }

    @Test("by size: a segment closes once its file holds max_bytes")
    func bySize() throws {
        let clock = Clock()
        let log = try writer(clock, interval: 0, maxBytes: 4_096)
        for index in 0..<100 {
            log.record(Self.record("size-\(index)", at: clock.now))
            log.settle()
        }
        log.close()
        let found = EventLogSegments.discover(path)
        #expect(found.count >= 3, "\(found.count) segments for 100 lines of about 200 bytes")
        for (_, files) in found { #expect((try FileManager.default.attributesOfItem(atPath: files.log!)[.size] as? Int ?? 0) >= 4_096) }
        #expect(try audit().result == .verified)
    }

    /// Found: once retention had deleted the first segment's file, `risc log prove` refused every
    /// event ("the log does not hold the checkpoint's lines from its genesis"), though the digest
    /// before the oldest segment held keeps the tree up to it, which is all a proof needs.
    @Test(
        "retention deletes old segments' files, the next digest names them expired; the log still verifies, checkpoints included; lines in the segments held are still proved (the tree before them from the digest), and an event whose segment is gone says so"
    )
    func retention() throws {
        let clock = Clock()
        let log = try writer(clock, retention: 2.5 * 3_600)
        hours(log, clock, 6)
        log.close()
        let found = EventLogSegments.discover(path)
        let gone = found.filter { $0.value.log == nil }.keys.sorted()
        #expect(!gone.isEmpty && gone.first == 1, "\(found.keys.sorted()): deleted \(gone)")
        #expect(found.values.allSatisfy { $0.digest != nil }, "digests stay")
        let named = try found.values.flatMap { try EventLogSegmentDigest.parse(String(contentsOfFile: $0.digest!, encoding: .utf8)).expired }
        #expect(Set(named) == Set(gone))
        let result = try audit()
        #expect(result.result == .verified, "\(String(describing: result.summary.problem)) \(String(describing: result.checkpointProblem))")
        let note = try String(contentsOfFile: JSONLinesEventLog.checkpointPath(of: path), encoding: .utf8)
        let checkpoint = try EventLogCheckpoint.parse(note: note)
        for jti in ["j4", "j5"] {
            let proof = try EventLogProof.make(log: path, jti: jti, note: note, checkpoint: checkpoint)
            #expect(!proof.entries.isEmpty, "\(jti)")
            let checked = try EventLogProof.check(json: proof.json, key: verifier)
            #expect(checked.lines.count == proof.entries.count && checked.lines.allSatisfy { $0.contains("\"\(jti)\"") })
        }
        let deleted = try EventLogProof.make(log: path, jti: "j0", note: note, checkpoint: checkpoint)
        #expect(deleted.entries.isEmpty && deleted.goneBefore > 0)
    }

    @Test("an insider deletes a segment, deletes a digest, shortens a segment and chains it again, or re-signs a digest: each named")
    func tampering() throws {
        let clock = Clock()
        let log = try writer(clock)
        hours(log, clock, 5)
        log.close()
        let discovered = EventLogSegments.discover(path)
        let found = try (1...5).reduce(into: [Int: (log: String, digest: String)]()) { found, number in
            let files = try #require(discovered[number], "segment \(number) of \(discovered.keys.sorted()); the log: \(Self.listing(path))")
            found[number] = (try #require(files.log), try #require(files.digest))
        }
        let keep = directory + "/keep"
        try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
        func saved(_ file: String) -> String { keep + "/" + (file as NSString).lastPathComponent }
        for (_, files) in found { for file in [files.log, files.digest] { try FileManager.default.copyItem(atPath: file, toPath: saved(file)) } }
        func restore() throws {
            for (_, files) in found {
                for file in [files.log, files.digest] {
                    try? FileManager.default.removeItem(atPath: file)
                    try FileManager.default.copyItem(atPath: saved(file), toPath: file)
                }
            }
        }
        func reason() throws -> EventLogVerifier.Reason? { try EventLogSegments.verify(path, key: verifier).problem?.reason }
        let untouched = try EventLogSegments.verify(path, key: verifier).problem
        #expect(untouched == nil, "\(String(describing: untouched)); the log: \(Self.listing(path))")

        try FileManager.default.removeItem(atPath: found[2]!.log)
        #expect(try reason() == .segmentMissing)
        try restore()

        try FileManager.default.removeItem(atPath: found[3]!.digest)
        #expect(try reason() == .digestChainBroken)
        try restore()

        // Segment 2 loses its last line: its own chain still holds, but it is not what was hashed.
        let text = try String(contentsOfFile: found[2]!.log, encoding: .utf8)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        lines.removeLast()
        try (lines.joined(separator: "\n") + "\n").write(toFile: found[2]!.log, atomically: true, encoding: .utf8)
        #expect(try reason() == .segmentHashMismatch)
        try restore()

        // A digest signed again with another key.
        let other = try CheckpointKey.generate(name: "test-log").key
        let digest = try EventLogSegmentDigest.parse(String(contentsOfFile: found[4]!.digest, encoding: .utf8))
        try digest.text(signedBy: other).write(toFile: found[4]!.digest, atomically: true, encoding: .utf8)
        #expect(try reason() == .digestSigInvalid)
        try restore()

        // A byte flipped mid-segment: the chain names the line.
        var bytes = [UInt8](FileManager.default.contents(atPath: found[3]!.log)!)
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: found[3]!.log))
        #expect(try [.prevMismatch, .badJSON].contains(reason()))
        try restore()
        #expect(try reason() == nil)
    }

    @Test("a rotation cut off between the rename and the digest (a crash) is finished at the next start")
    func interruptedRotation() throws {
        let clock = Clock()
        var log = try writer(clock)
        hours(log, clock, 2)
        log.record(Self.record("before-the-crash", at: clock.now))
        log.close()
        // The crash: the file was renamed, the digest not yet written.
        #expect(rename(path, EventLogSegments.file(of: path, number: 3, kind: "log")) == 0)
        log = try writer(clock)
        log.record(Self.record("after-the-crash", at: clock.now))
        log.close()
        #expect(EventLogSegments.discover(path)[3]?.digest != nil)
        #expect(try EventLogSegments.verify(path, key: verifier).problem == nil)
    }

    /// The log took three clocks: its own (`clock:`), the checkpoints' (`now:`) and the segments'
    /// (`now:`), each defaulting to the system's. A log given the receiver's clock alone made its
    /// lines by it but turned segments and made checkpoints by the system's: an hour later by its
    /// clock, nothing turned. It has one clock now.
    @Test("given only its clock, the log turns segments, dates their digests and makes checkpoints by it")
    func oneClock() throws {
        let clock = Clock()
        let log = try writer(clock)
        log.record(Self.record("first", at: clock.now))
        log.settle()
        clock.advance(3_600)
        log.record(Self.record("an-hour-later", at: clock.now))
        log.settle()
        log.close()
        let digest = try #require(try EventLogSegments.newestDigest(path), Comment(rawValue: Self.listing(path)))
        #expect(digest.digest.closed == clock.now)
        let rotated = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").first { $0.contains(#""outcome":"rotated""#) }
        #expect(rotated?.contains(Timestamp.iso8601(clock.now)) == true, "\(rotated ?? "no rotated line")")
        let note = try String(contentsOfFile: directory + "/events.checkpoint", encoding: .utf8)
        #expect(try EventLogCheckpoint.parse(note: note).time == clock.now)
    }
}
