import Foundation
import RISCCore

/// `risc log prove`: one event's lines with RFC 9162 inclusion proofs against a signed checkpoint,
/// as one JSON document an auditor checks on their own (`risc log check-proof`) with the
/// verifier key: each line is in the tree the checkpoint signed, unchanged.
public struct EventLogProof: Sendable {
    public struct Entry: Sendable, Equatable {
        public var index: UInt64
        public var line: String
        public var path: [[UInt8]]
    }

    /// The checkpoint's signed note, as it was signed.
    public var note: String
    public var entries: [Entry]
    /// Lines of the event written after the checkpoint (not provable against it yet).
    public var unsealed = 0
    /// Lines before this `seq` were in segments retention deleted: none of them can be proved.
    public var goneBefore: UInt64 = 0

    /// The lines about `jti` in the log at `path` (its segments and rotated files), proved against
    /// `checkpoint`. When retention deleted the oldest segments' files, the lines from the oldest
    /// segment held on are read, and the tree before them is the compact range the digest before
    /// that segment kept.
    public static func make(log path: String, jti: String, note: String, checkpoint: EventLogCheckpoint) throws -> EventLogProof {
        let found = EventLogSegments.discover(path)
        let numbers = found.keys.sorted()
        let firstHeld = numbers.first { found[$0]?.log != nil } ?? (numbers.last.map { $0 + 1 } ?? 1)
        guard firstHeld > 1 else { return try make(files: EventLogSegments.files(of: path), jti: jti, note: note, checkpoint: checkpoint) }
        guard let file = found[firstHeld - 1]?.digest, let data = FileManager.default.contents(atPath: file),
            case let digest = try EventLogSegmentDigest.parse(String(decoding: data, as: UTF8.self)), digest.tree != nil
        else {
            throw EventLogCheckpoint.Invalid("segment \(firstHeld - 1)'s file is gone and its digest keeps no tree of the lines before it")
        }
        let files = numbers.filter { $0 >= firstHeld }.compactMap { found[$0]?.log } + (FileManager.default.fileExists(atPath: path) ? [path] : [])
        return try make(files: files, start: digest.end, jti: jti, note: note, checkpoint: checkpoint)
    }

    /// The lines about `jti` in `files`, proved against `checkpoint` (signed as `note`); `start`:
    /// where the chain and tree stood before the first of them (the log's genesis when nil). The
    /// files are read twice, a chunk at a time: for the event's lines, then for the hashes of the
    /// tree's nodes their paths need (`InclusionProof.Nodes`).
    public static func make(
        files: [String], start: EventLogVerifier.Start? = nil, jti: String, note: String, checkpoint: EventLogCheckpoint
    ) throws -> EventLogProof {
        let gone = start?.tree?.size ?? 0
        var matches: [(UInt64, String)] = []
        var unsealed = 0
        // Only a line holding the jti's bytes is parsed (a jti of printable ASCII but `"` and `\` is
        // written as it is; any other is looked for in every line).
        let needle = jti.utf8.allSatisfy({ (0x20...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }) ? Array(jti.utf8) : nil
        let summary = try EventLogVerifier.verify(files: files, start: start) { seq, line, _ in
            if let needle, !contains(line, needle) { return }
            guard let object = try? JSONParser.parseObject(line), object["jti"]?.stringValue == jti else { return }
            if seq < checkpoint.size { matches.append((seq, String(decoding: line, as: UTF8.self))) } else { unsealed += 1 }
        }
        if let problem = summary.problem { throw EventLogCheckpoint.Invalid("the log's chain is broken: \(problem)") }
        guard summary.firstSeq == gone, gone <= checkpoint.size, (summary.lastSeq.map { $0 + 1 } ?? gone) >= checkpoint.size else {
            throw EventLogCheckpoint.Invalid(
                gone > checkpoint.size
                    ? "the checkpoint's \(checkpoint.size) lines end in segments retention deleted: prove against a newer checkpoint"
                    : "the log does not hold the checkpoint's \(checkpoint.size) lines from its genesis")
        }
        var nodes = try InclusionProof.Nodes(size: checkpoint.size, prefix: start?.tree, proving: matches.map(\.0))
        let again = try EventLogVerifier.verify(files: files, start: start) { seq, _, leaf in
            if seq < checkpoint.size { nodes.append(leaf: leaf) }
        }
        if let problem = again.problem { throw EventLogCheckpoint.Invalid("the log changed while it was read: \(problem)") }
        let tree = try nodes.finish()
        guard tree.root == checkpoint.root else { throw EventLogCheckpoint.Invalid("the log's tree is not the one the checkpoint signed") }
        let entries = try matches.map { Entry(index: $0.0, line: $0.1, path: try tree.path($0.0)) }
        return EventLogProof(note: note, entries: entries, unsealed: unsealed, goneBefore: gone)
    }

    /// Whether `bytes` hold `needle` (`memchr` for its first byte, then `memcmp`).
    static func contains(_ bytes: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        return bytes.withUnsafeBytes { (hay: UnsafeRawBufferPointer) -> Bool in
            needle.withUnsafeBytes { (wanted: UnsafeRawBufferPointer) -> Bool in
                guard let start = hay.baseAddress, let target = wanted.baseAddress else { return false }
                var offset = 0
                while hay.count - offset >= wanted.count {
                    guard let found = memchr(start + offset, Int32(first), hay.count - offset) else { return false }
                    let at = UnsafeRawPointer(found) - start
                    if hay.count - at < wanted.count { return false }
                    if memcmp(start + at, target, wanted.count) == 0 { return true }
                    offset = at + 1
                }
                return false
            }
        }
    }

    public var json: String {
        var object = JSONObject()
        object["checkpoint"] = .string(note)
        object["proofs"] = .array(
            entries.map { entry in
                ["index": .number(Double(entry.index)), "line": .string(entry.line), "path": .array(entry.path.map { .string(Base64URL.encodeStandard($0)) })]
            })
        return JSONValue.object(object).prettyPrinted
    }

    /// Checks a document `json` made with `key`: the checkpoint's signature, then each line's path
    /// to its root; with `jti`, that every line is that event's. Returns the checkpoint and the
    /// lines proved. A document that proves no line, or gives a line twice, is no proof.
    public static func check(json: String, key: CheckpointVerifier, jti: String? = nil) throws -> (checkpoint: EventLogCheckpoint, lines: [String]) {
        let object = try JSONParser.parseObject(Array(json.utf8))
        guard let note = object["checkpoint"]?.stringValue, let proofs = object["proofs"]?.arrayValue else {
            throw EventLogCheckpoint.Invalid("not a proof: checkpoint and proofs expected")
        }
        let checkpoint = try EventLogCheckpoint.verify(note: note, key: key)
        guard !proofs.isEmpty else { throw EventLogCheckpoint.Invalid("the document proves no line") }
        var lines: [String] = []
        var seen: Set<UInt64> = []
        for proof in proofs {
            // Every element of the path decodes, or none is taken: one dropped unseen would still prove.
            guard let entry = proof.objectValue, let index = entry["index"].flatMap(EventLogChain.sequenceNumber), let line = entry["line"]?.stringValue,
                let elements = entry["path"]?.arrayValue, case let path = elements.compactMap({ $0.stringValue.flatMap { Data(base64Encoded: $0) }.map(Array.init) }),
                path.count == elements.count
            else { throw EventLogCheckpoint.Invalid("a proof without index, line or path") }
            guard seen.insert(index).inserted else { throw EventLogCheckpoint.Invalid("line \(index) is given twice") }
            guard
                InclusionProof.verify(
                    leaf: EventLogChain.leafHash(Array(line.utf8)), index: index, size: checkpoint.size, path: path, root: checkpoint.root)
            else { throw EventLogCheckpoint.Invalid("line \(index) is not in the tree the checkpoint signed") }
            if let jti {
                let about = (try? JSONParser.parseObject(Array(line.utf8)))?["jti"]?.stringValue
                guard about == jti else {
                    throw EventLogCheckpoint.Invalid(
                        "line \(index) is about \(about.map { Printable.safe($0, maxBytes: 80) } ?? "no jti"), not \(Printable.safe(jti, maxBytes: 80))")
                }
            }
            lines.append(line)
        }
        return (checkpoint, lines)
    }
}
