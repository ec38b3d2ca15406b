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

    /// The lines about `jti` in `files`, proved against `checkpoint` (signed as `note`).
    public static func make(files: [String], jti: String, note: String, checkpoint: EventLogCheckpoint) throws -> EventLogProof {
        var leaves: [[UInt8]] = []
        var matches: [(UInt64, String)] = []
        var unsealed = 0
        let summary = try EventLogVerifier.verify(files: files) { seq, line, leaf in
            leaves.append(leaf)
            guard let object = try? JSONParser.parseObject(line), object["jti"]?.stringValue == jti else { return }
            if seq < checkpoint.size { matches.append((seq, String(decoding: line, as: UTF8.self))) } else { unsealed += 1 }
        }
        if let problem = summary.problem { throw EventLogCheckpoint.Invalid("the log's chain is broken: \(problem)") }
        guard summary.firstSeq == 0, UInt64(leaves.count) >= checkpoint.size else {
            throw EventLogCheckpoint.Invalid("the log does not hold the checkpoint's \(checkpoint.size) lines from its genesis")
        }
        let tree = leaves[..<Int(checkpoint.size)]
        guard InclusionProof.treeHash(tree) == checkpoint.root else { throw EventLogCheckpoint.Invalid("the log's tree is not the one the checkpoint signed") }
        let entries = matches.map { Entry(index: $0.0, line: $0.1, path: InclusionProof.path(index: Int($0.0), leaves: tree)) }
        return EventLogProof(note: note, entries: entries, unsealed: unsealed)
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
    /// to its root. Returns the checkpoint and the lines proved.
    public static func check(json: String, key: CheckpointVerifier) throws -> (checkpoint: EventLogCheckpoint, lines: [String]) {
        let object = try JSONParser.parseObject(Array(json.utf8))
        guard let note = object["checkpoint"]?.stringValue, let proofs = object["proofs"]?.arrayValue else {
            throw EventLogCheckpoint.Invalid("not a proof: checkpoint and proofs expected")
        }
        let checkpoint = try EventLogCheckpoint.verify(note: note, key: key)
        var lines: [String] = []
        for proof in proofs {
            guard let entry = proof.objectValue, let index = entry["index"].flatMap(EventLogChain.sequenceNumber), let line = entry["line"]?.stringValue,
                let path = entry["path"]?.arrayValue?.compactMap({ $0.stringValue.flatMap { Data(base64Encoded: $0) }.map(Array.init) })
            else { throw EventLogCheckpoint.Invalid("a proof without index, line or path") }
            guard
                InclusionProof.verify(
                    leaf: EventLogChain.leafHash(Array(line.utf8)), index: index, size: checkpoint.size, path: path, root: checkpoint.root)
            else { throw EventLogCheckpoint.Invalid("line \(index) is not in the tree the checkpoint signed") }
            lines.append(line)
        }
        return (checkpoint, lines)
    }
}
