import Foundation
import RISCCore
import RISCTestKit
import Testing

@testable import RISCLocal

/// Issue 28: signed checkpoints (C2SP signed notes of the RFC 9162 tree of every line), made by
/// the writer on an injected clock, and `EventLogAudit` against the insider's rewrites the chain
/// alone cannot show.
@Suite("Event log checkpoints")
struct EventLogCheckpointTests {
    let directory: String
    var path: String { directory + "/events.log" }
    let key: CheckpointKey
    var verifier: CheckpointVerifier { get throws { try CheckpointVerifier(key.verifierKey) } }

    init() throws {
        directory = Scratch.root.appendingPathComponent("risc-checkpoint-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        key = try CheckpointKey.generate(name: "test-log").key
    }

    /// RFC 9162 §2.1.1's definition, recursively, to check the compact range against.
    static func mth(_ leaves: ArraySlice<[UInt8]>) -> [UInt8] {
        if leaves.isEmpty { return SHA256.hash([UInt8]()) }
        if leaves.count == 1 { return leaves.first! }
        var k = 1
        while k * 2 < leaves.count { k *= 2 }
        let split = leaves.startIndex + k
        return SHA256.hash([0x01] + mth(leaves[..<split]) + mth(leaves[split...]))
    }

    @Test("the compact range's root is RFC 9162's Merkle tree hash at every size")
    func merkle() {
        var range = MerkleRange()
        var leaves: [[UInt8]] = []
        #expect(range.root == Self.mth([]))
        for index in 0..<33 {
            let leaf = EventLogChain.leafHash(Array("line \(index)".utf8))
            leaves.append(leaf)
            range.append(leaf: leaf)
            #expect(range.root == Self.mth(leaves[...]), "size \(leaves.count)")
        }
    }

    @Test("a signed note verifies with its key, and not with another key, nor once its body is changed")
    func signedNote() throws {
        let checkpoint = EventLogCheckpoint(origin: "risc-event-log/a", size: 42, root: SHA256.hash([1, 2, 3]), time: 1_800_000_000.5)
        let note = try checkpoint.signed(by: key)
        #expect(note.hasPrefix("risc-event-log/a\n42\n") && note.contains("\n\n\u{2014} test-log "))
        #expect(try EventLogCheckpoint.verify(note: note, key: verifier) == checkpoint)
        let other = try CheckpointVerifier(try CheckpointKey.generate(name: "test-log").key.verifierKey)
        #expect(throws: EventLogCheckpoint.Invalid.self) { try EventLogCheckpoint.verify(note: note, key: other) }
        let edited = note.replacingOccurrences(of: "\n42\n", with: "\n41\n")
        #expect(throws: EventLogCheckpoint.Invalid.self) { try EventLogCheckpoint.verify(note: edited, key: verifier) }
        #expect(throws: (any Error).self) { try CheckpointVerifier(key.verifierKey.replacingOccurrences(of: "test-log", with: "other-log")) }
        // The key file keeps its name with it.
        let file = directory + "/checkpoint.key"
        let made = try CheckpointKey.generate(name: "node-a-log")
        try made.file.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CheckpointKey(file: file).verifierKey == made.key.verifierKey)
    }

    /// A writer with checkpoints on `clock`; `lines` records, then closed.
    func write(_ lines: Int, clock: TestClock, advanceEvery: Int = 0) async throws {
        let log = try JSONLinesEventLog(path: path, logID: "node-a", checkpoints: .init(key: key, interval: 60), clock: clock.function)
        for index in 0..<lines {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: clock.now)
            record["jti"] = .string("jti-\(index)")
            log.record(record)
            if advanceEvery > 0, (index + 1) % advanceEvery == 0 {
                log.settle()
                let before = FileManager.default.contents(atPath: JSONLinesEventLog.checkpointPath(of: path))
                clock.advance(61)
                _ = await waitWhile { FileManager.default.contents(atPath: JSONLinesEventLog.checkpointPath(of: path)) == before }
            }
        }
        log.close()
    }

    func audit(trusted: String? = nil) throws -> EventLogAudit {
        try EventLogAudit.run(
            files: EventLogVerifier.files(of: path), key: try verifier,
            checkpointNote: FileManager.default.contents(atPath: JSONLinesEventLog.checkpointPath(of: path)).map { String(decoding: $0, as: UTF8.self) },
            trustedNote: trusted)
    }

    @Test("checkpoints every interval of the injected clock and at the close; the log verifies against them, across a restart")
    func writerCheckpoints() async throws {
        let clock = TestClock()
        try await write(10, clock: clock, advanceEvery: 4)
        var result = try audit()
        #expect(result.result == .verified && result.checkpoint?.size == 11 && result.unsealed == 0, "\(result)")
        // A restart rebuilds the tree from the files: its checkpoints still match.
        try await write(3, clock: clock)
        result = try audit()
        #expect(result.result == .verified && result.checkpoint?.size == 14, "\(result)")
        // Lines after the newest checkpoint are a warning.
        let log = try JSONLinesEventLog(path: path, logID: "node-a")
        log.record(EventLogRecord(step: .serve, outcome: .started, time: clock.now))
        log.close()
        result = try audit()
        #expect(result.result == .verified && result.unsealed == 1)
    }

    /// Found: a writer that signs checkpoints read its log from the genesis at every start to
    /// rebuild the tree (a 705 MB log: 5 s before the receiver answered; logrotate's files too), and
    /// without risc's own segments nothing let it go on from where it stood. Now each checkpoint
    /// records where the chain, the tree and the file stood (`events.resume`), and a start reads
    /// only the lines after it: shown here by a line edited before it (same length, same file),
    /// which a start from the genesis stops at ("no checkpoints") and this start does not read (it
    /// goes on signing; the audit still finds the edit). A state
    /// that does not fit the file (copied and truncated by logrotate, garbage) is the genesis read.
    @Test("a start goes on from the last checkpoint's recorded state, reading only the lines after it; a state that does not fit is a read from the genesis")
    func resumesFromTheLastCheckpoint() async throws {
        let clock = TestClock()
        try await write(9, clock: clock, advanceEvery: 3)
        let state = EventLogResume.path(of: path)
        let recorded = try #require(EventLogResume(text: try String(contentsOfFile: state, encoding: .utf8)))
        #expect(recorded.chain.next == 10 && recorded.tree.size == 10)
        #expect(recorded.offset == (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value)

        // A start after copytruncate (the lines in events.log.1, events.log empty: the offset past
        // its end) and after a garbage state reads from the genesis, and signs what is there.
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        try whole.write(to: URL(fileURLWithPath: path + ".1"))
        try FileHandle(forWritingAtPath: path).map { try $0.truncate(atOffset: 0) }
        try await write(2, clock: clock)
        var result = try audit()
        #expect(result.result == .verified && result.checkpoint?.size == 12, "\(result)")
        try "risc event log resume 1\nchain 12 x\n".write(toFile: state, atomically: true, encoding: .utf8)
        try await write(1, clock: clock)
        result = try audit()
        #expect(result.result == .verified && result.checkpoint?.size == 13, "\(result)")
        let saved = try Data(contentsOf: URL(fileURLWithPath: state))
        #expect(EventLogResume(text: String(decoding: saved, as: UTF8.self))?.chain.next == 13)
        // Nor is a FIFO put in its place waited on (reading one blocks until a writer comes).
        try FileManager.default.removeItem(atPath: state)
        try #require(mkfifo(state, 0o600) == 0)
        #expect(EventLogResume.tree(log: path, end: EventLogChain(next: 13, last: [])) == nil)
        try FileManager.default.removeItem(atPath: state)
        try saved.write(to: URL(fileURLWithPath: state))

        // A line before the recorded state edited in place: not read at the start.
        var text = try String(contentsOfFile: path, encoding: .utf8)
        let edited = try #require(text.range(of: #""jti":"jti-0""#))
        text.replaceSubrange(edited, with: #""jti":"jti-X""#)
        let file = try #require(FileHandle(forWritingAtPath: path))
        try file.write(contentsOf: Data(text.utf8))
        try file.close()
        try await write(2, clock: clock)
        let lines = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!lines.contains("no checkpoints"), "\(lines.suffix(400))")
        let signed = try EventLogCheckpoint.parse(note: try String(contentsOfFile: JSONLinesEventLog.checkpointPath(of: path), encoding: .utf8))
        #expect(signed.size == 15)
        result = try audit()
        #expect(result.result == .tampered && result.summary.problem?.reason == .prevMismatch, "\(result)")
    }

    @Test("what the chain alone cannot show: the end cut off, the log rewritten and chained again, an older checkpoint put back, another key's signature")
    func insiderRewrites() async throws {
        let clock = TestClock()
        try await write(8, clock: clock, advanceEvery: 3)
        let checkpointFile = JSONLinesEventLog.checkpointPath(of: path)
        let final = try String(contentsOfFile: checkpointFile, encoding: .utf8)
        let original = try String(contentsOfFile: path, encoding: .utf8)
        var lines = original.split(separator: "\n").map(String.init)

        // Truncated after the last checkpoint: the chain is whole, the checkpoint says more.
        try (lines.dropLast(2).joined(separator: "\n") + "\n").write(toFile: path, atomically: false, encoding: .utf8)
        #expect(try EventLogVerifier.verify(files: [path]).problem == nil)
        var result = try audit()
        #expect(result.result == .tampered && result.checkpointProblem?.reason == .truncated, "\(result)")

        // Rewritten whole and chained again (a line changed), checkpoint left: the root differs.
        try FileManager.default.removeItem(atPath: path)
        let rewriter = try JSONLinesEventLog(path: path, logID: "node-a")
        for line in lines.dropFirst() {
            let object = try JSONParser.parseObject(Array(line.utf8))
            guard object["step"] == "received" else { continue }
            var record = EventLogRecord(step: .received, outcome: .accepted, time: clock.now)
            record["jti"] = object["jti"] == "jti-2" ? "jti-forged" : object["jti"]
            rewriter.record(record)
        }
        rewriter.close()
        #expect(try EventLogVerifier.verify(files: [path]).problem == nil)
        result = try audit()
        #expect(result.result == .tampered && result.checkpointProblem?.reason == .rootMismatch, "\(result)")

        // The original back, with an older checkpoint put in place of the newest, which the
        // auditor kept: rollback.
        try original.write(toFile: path, atomically: false, encoding: .utf8)
        lines = original.split(separator: "\n").map(String.init)
        let older = try EventLogCheckpoint(origin: "risc-event-log/node-a", size: 4, root: try #require(EventLogVerifier.verify(files: [path], rootsAt: [4]).roots[4]), time: clock.now)
            .signed(by: key)
        try older.write(toFile: checkpointFile, atomically: true, encoding: .utf8)
        #expect(try audit().result == .verified)
        result = try audit(trusted: final)
        #expect(result.result == .tampered && result.checkpointProblem?.reason == .rollback, "\(result)")

        // Re-signed with another key: not this log's checkpoint.
        let stranger = try CheckpointKey.generate(name: "test-log").key
        let forged = try EventLogCheckpoint.verify(note: final, key: try verifier).signed(by: stranger)
        try forged.write(toFile: checkpointFile, atomically: true, encoding: .utf8)
        result = try audit()
        #expect(result.result == .tampered && result.checkpointProblem?.reason == .checkpointInvalid, "\(result)")

        // No key: undecided.
        let unkeyed = try EventLogAudit.run(files: [path], key: nil, checkpointNote: final, trustedNote: nil)
        #expect(unkeyed.result == .undecided)
    }

    @Test("inclusion proofs when the first leaves are known only by a compact range (retention deleted them): the same paths as from every leaf, for every prefix and size")
    func inclusionAfterPrefix() throws {
        let leaves = (0..<40).map { EventLogChain.leafHash(Array("line \($0)".utf8)) }
        for size in 1...40 {
            for gone in 0..<size {
                var prefix = MerkleRange()
                for leaf in leaves[..<gone] { prefix.append(leaf: leaf) }
                var nodes = try InclusionProof.Nodes(size: UInt64(size), prefix: prefix, proving: (gone..<size).map { UInt64($0) })
                for leaf in leaves[gone..<size] { nodes.append(leaf: leaf) }
                let tree = try nodes.finish()
                #expect(tree.root == Self.mth(leaves[..<size]), "size \(size), \(gone) gone")
                for index in gone..<size {
                    let path = try tree.path(UInt64(index))
                    #expect(path == InclusionProof.path(index: index, leaves: leaves[..<size]))
                    #expect(
                        InclusionProof.verify(leaf: leaves[index], index: UInt64(index), size: UInt64(size), path: path, root: Self.mth(leaves[..<size])),
                        "size \(size), \(gone) gone, index \(index)")
                }
            }
        }
    }

    @Test("log prove's look for a jti's bytes in a line: found at the start, the end, after a false start; not when cut off by the end")
    func proofPrefilter() {
        let line = Array(#"{"jti":"aab-1","x":"aab"}"#.utf8)
        for (needle, found) in [("aab-1", true), ("{\"jti", true), ("aab\"}", true), ("ab-1", true), ("aab\"}x", false), ("aab-2", false), ("", true)] {
            #expect(EventLogProof.contains(line[...], Array(needle.utf8)) == found, "\(needle)")
            #expect(EventLogProof.contains(line[1...], Array(needle.utf8)) == (found && !needle.hasPrefix("{")), "\(needle) from the second byte")
        }
    }

    @Test("inclusion proofs (RFC 9162 §2.1.3): every leaf of every size proves against the root; another leaf, index or size does not")
    func inclusion() {
        var leaves: [[UInt8]] = []
        for size in 1...17 {
            leaves.append(EventLogChain.leafHash(Array("line \(size)".utf8)))
            let root = Self.mth(leaves[...])
            for index in 0..<size {
                let path = InclusionProof.path(index: index, leaves: leaves[...])
                #expect(InclusionProof.verify(leaf: leaves[index], index: UInt64(index), size: UInt64(size), path: path, root: root), "size \(size) index \(index)")
                if size > 1 {
                    let other = (index + 1) % size
                    #expect(!InclusionProof.verify(leaf: leaves[other], index: UInt64(index), size: UInt64(size), path: path, root: root))
                    #expect(!InclusionProof.verify(leaf: leaves[index], index: UInt64(other), size: UInt64(size), path: path, root: root))
                }
            }
        }
    }

    @Test("risc log prove's document: an event's lines proved against the checkpoint; an edited line, another key or another checkpoint is not")
    func proofDocument() async throws {
        let clock = TestClock()
        try await write(9, clock: clock, advanceEvery: 4)
        let note = try String(contentsOfFile: JSONLinesEventLog.checkpointPath(of: path), encoding: .utf8)
        let proof = try EventLogProof.make(files: [path], jti: "jti-5", note: note, checkpoint: try EventLogCheckpoint.parse(note: note))
        #expect(proof.entries.count == 1 && proof.entries[0].index == 6 && proof.entries[0].line.contains(#""jti":"jti-5""#))
        let checked = try EventLogProof.check(json: proof.json, key: try verifier)
        #expect(checked.lines == [proof.entries[0].line] && checked.checkpoint.size == 10)
        #expect(throws: EventLogCheckpoint.Invalid.self) {
            try EventLogProof.check(json: proof.json.replacingOccurrences(of: "jti-5", with: "jti-6"), key: try verifier)
        }
        let stranger = try CheckpointVerifier(try CheckpointKey.generate(name: "test-log").key.verifierKey)
        #expect(throws: EventLogCheckpoint.Invalid.self) { try EventLogProof.check(json: proof.json, key: stranger) }
        // A line after the checkpoint cannot be proved against it.
        let later = try JSONLinesEventLog(path: path, logID: "node-a")
        var record = EventLogRecord(step: .applied, outcome: .applied, time: clock.now)
        record["jti"] = "jti-5"
        later.record(record)
        later.close()
        let again = try EventLogProof.make(files: [path], jti: "jti-5", note: note, checkpoint: try EventLogCheckpoint.parse(note: note))
        #expect(again.entries.count == 1 && again.unsealed == 1)
    }

    /// Found: `risc log check-proof` said "PROVED: 0 lines" and exited 0 for a document with no
    /// proofs, counted one line given twice as two, and took a proof of another event's lines as
    /// well as the one asked about: an auditor's script checking the exit status passed a
    /// document that proved nothing of the event. Now: no line or a line twice is not a proof, a
    /// path element that is no base64 is refused, and `jti:` requires every line to be that event's.
    @Test("a proof document proves at least one line, each once, with well-formed paths; with a jti, that event's lines only")
    func proofDocumentLoopholes() async throws {
        try await write(9, clock: TestClock(), advanceEvery: 4)
        let note = try String(contentsOfFile: JSONLinesEventLog.checkpointPath(of: path), encoding: .utf8)
        let proof = try EventLogProof.make(files: [path], jti: "jti-5", note: note, checkpoint: try EventLogCheckpoint.parse(note: note))
        var document = try JSONParser.parseObject(Array(proof.json.utf8))
        let entry = try #require(document["proofs"]?.arrayValue?.first?.objectValue)
        func refusal(_ proofs: [JSONValue], jti: String? = nil) -> String? {
            document["proofs"] = .array(proofs)
            do {
                _ = try EventLogProof.check(json: JSONValue.object(document).serialized, key: try verifier, jti: jti)
                return nil
            } catch { return "\(error)" }
        }
        #expect(refusal([])?.contains("proves no line") == true)
        #expect(refusal([.object(entry), .object(entry)])?.contains("line 6 is given twice") == true)
        var junk = entry
        junk["path"] = .array((entry["path"]?.arrayValue ?? []) + [.string("!!")])
        #expect(refusal([.object(junk)])?.contains("a proof without index, line or path") == true)
        #expect(refusal([.object(entry)], jti: "jti-6")?.contains("line 6 is about jti-5, not jti-6") == true)
        #expect(refusal([.object(entry)], jti: "jti-5") == nil)
        #expect(refusal([.object(entry)]) == nil)
    }
}
