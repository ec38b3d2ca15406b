import Foundation
public import RISCCore

/// Checks an event log's hash chain (`EventLogChain`) line by line, across its files in order,
/// and says where it first breaks and why. A torn line (a write cut off by a crash) is reported,
/// not counted as tampering: at the very end of the log, or followed by the `log`/`torn` line risc
/// writes when it starts again after one, naming its length.
public struct EventLogVerifier: Sendable {
    /// Why the chain breaks (the names `risc log verify` prints).
    public enum Reason: String, Sendable {
        /// A line that is not a JSON object, or a chained log's line without `seq` and `prev`.
        case badJSON = "bad_json"
        /// `prev` is not the hash of the line before it (a line edited, removed or moved).
        case prevMismatch = "prev_mismatch"
        /// `seq` skips numbers (lines removed).
        case seqGap = "seq_gap"
        /// `seq` goes back (lines moved or replayed).
        case seqRegress = "seq_regress"
        /// A write cut off (a warning, not tampering).
        case torn
        /// A closed segment's file is gone, and no later digest says retention deleted it.
        case segmentMissing = "segment_missing"
        /// A closed segment's file is not the one its digest hashed.
        case segmentHashMismatch = "segment_hash_mismatch"
        /// A digest's signature does not verify with the key.
        case digestSigInvalid = "digest_sig_invalid"
        /// A digest is missing, unreadable, or does not name the one before it (or its `seq` does not go on from it).
        case digestChainBroken = "digest_chain_broken"
    }

    /// Where and why.
    public struct Finding: Sendable, Equatable, CustomStringConvertible {
        public var reason: Reason
        public var file: String
        /// 1-based line number within `file`.
        public var line: Int
        public var seq: UInt64?
        public var detail: String

        public var description: String {
            "\(reason.rawValue) at \(file):\(line)\(seq.map { " (seq \($0))" } ?? ""): \(detail)"
        }

        public var json: JSONValue {
            var object = JSONObject()
            object["reason"] = .string(reason.rawValue)
            object["file"] = .string(file)
            object["line"] = .number(Double(line))
            if let seq { object["seq"] = .number(Double(seq)) }
            object["detail"] = .string(detail)
            return .object(object)
        }
    }

    /// What was read.
    public struct Summary: Sendable {
        /// Chained lines read.
        public var lines = 0
        /// Lines before the chain began (written by a risc without it).
        public var unchained = 0
        public var firstSeq: UInt64?
        public var lastSeq: UInt64?
        /// The genesis line's `log_id`, when the log starts with it.
        public var logID: String?
        /// Torn lines (warnings).
        public var torn: [Finding] = []
        /// The first break, if any: reading stops there.
        public var problem: Finding?
        /// Where the chain stands after the last line read.
        public var chain: EventLogChain?
        /// The Merkle tree of the lines from the genesis (with `keepTree`, when the log starts there).
        public var tree: MerkleRange?
        /// The tree's root at each size asked for (`rootsAt`).
        public var roots: [UInt64: [UInt8]] = [:]
    }

    public private(set) var summary = Summary()
    /// A line that did not parse, waiting to see whether the next one explains it as torn.
    private var pendingTorn: (file: String, line: Int, bytes: Int)?
    private let keepTree: Bool
    private let rootsAt: Set<UInt64>

    /// `keepTree`: build the Merkle tree of the lines; `rootsAt`: note its root at these sizes.
    /// `start`: where the chain (and tree) stood before the first line read, when the lines
    /// before it are gone (a segment's digest says).
    public init(keepTree: Bool = false, rootsAt: Set<UInt64> = [], start: Start? = nil) {
        self.keepTree = keepTree || !rootsAt.isEmpty
        self.rootsAt = rootsAt
        if let start {
            summary.chain = start.chain
            summary.tree = self.keepTree ? start.tree : nil
            summary.firstSeq = start.chain.next
            summary.logID = start.logID
        }
    }

    /// The state a verification goes on from.
    public struct Start: Sendable {
        public var chain: EventLogChain
        public var tree: MerkleRange?
        public var logID: String?
        public init(chain: EventLogChain, tree: MerkleRange?, logID: String?) { (self.chain, self.tree, self.logID) = (chain, tree, logID) }
    }

    /// Whether a break was found (reading further changes nothing).
    public var broken: Bool { summary.problem != nil }

    /// Checks one line (its exact bytes, without the newline). `final`: the last bytes of the
    /// last file, with no newline after them.
    public mutating func check(_ line: ArraySlice<UInt8>, file: String, number: Int, final: Bool = false) {
        guard summary.problem == nil else { return }
        guard let object = try? JSONParser.parseObject(line) else {
            if let pending = pendingTorn { return fail(.badJSON, pending.file, pending.line, nil, "not a JSON object") }
            if final {
                summary.torn.append(Finding(reason: .torn, file: file, line: number, seq: nil, detail: "the last line is cut off (\(line.count) bytes)"))
            } else {
                pendingTorn = (file, number, line.count)
            }
            return
        }
        guard let seq = object["seq"].flatMap(EventLogChain.sequenceNumber),
            let prevText = object["prev"]?.stringValue, let prev = Data(base64Encoded: prevText).map(Array.init), prev.count == 32
        else {
            if let pending = pendingTorn { return fail(.badJSON, pending.file, pending.line, nil, "not a JSON object") }
            if summary.chain == nil {
                summary.unchained += 1
                return
            }
            return fail(.badJSON, file, number, nil, "a line without seq and prev in a chained log")
        }
        if let pending = pendingTorn {
            pendingTorn = nil
            guard object["step"]?.stringValue == "log", object["outcome"]?.stringValue == "torn",
                object["bytes"]?.numberValue == Double(pending.bytes)
            else { return fail(.badJSON, pending.file, pending.line, nil, "not a JSON object") }
            summary.torn.append(Finding(reason: .torn, file: pending.file, line: pending.line, seq: nil, detail: "a line cut off (\(pending.bytes) bytes), said so by the next line"))
        }
        if let chain = summary.chain {
            if seq > chain.next { return fail(.seqGap, file, number, seq, "expected seq \(chain.next)") }
            if seq < chain.next { return fail(.seqRegress, file, number, seq, "expected seq \(chain.next)") }
            if prev != chain.last { return fail(.prevMismatch, file, number, seq, "prev is not the hash of the line before") }
        } else {
            summary.firstSeq = seq
            if seq == 0 {
                guard object["step"]?.stringValue == "log", object["outcome"]?.stringValue == "genesis", prev == EventLogChain.origin else {
                    return fail(.prevMismatch, file, number, seq, "seq 0 is not a genesis line")
                }
                summary.logID = object["log_id"]?.stringValue
            }
        }
        summary.lines += 1
        summary.lastSeq = seq
        let leaf = EventLogChain.leafHash(line)
        summary.chain = EventLogChain(next: seq + 1, last: leaf)
        if keepTree, summary.firstSeq == 0 || summary.tree != nil {
            if summary.tree == nil { summary.tree = MerkleRange() }
            summary.tree!.append(leaf: leaf)
            if rootsAt.contains(summary.tree!.size) { summary.roots[summary.tree!.size] = summary.tree!.root }
        }
    }

    /// The end of the input: a line left unexplained is bad.
    public mutating func finish() {
        if summary.problem == nil, let pending = pendingTorn { fail(.badJSON, pending.file, pending.line, nil, "not a JSON object") }
        pendingTorn = nil
    }

    private mutating func fail(_ reason: Reason, _ file: String, _ line: Int, _ seq: UInt64?, _ detail: String) {
        summary.problem = Finding(reason: reason, file: file, line: line, seq: seq, detail: detail)
    }

    /// Checks `files` in order (a `.gz` file is read through `gzip -dc`), each a chunk at a time
    /// (`LogLines`: a log of gigabytes takes the memory of its longest line).
    /// `each`: called with every chained line that checks: its `seq`, its exact bytes and its leaf hash.
    /// `held`: files' bytes a caller has read already; `opened`: files a caller has opened, read
    /// from where they stand (`EventLogResume`: from the last checkpoint's offset).
    public static func verify(
        files: [String], keepTree: Bool = false, rootsAt: Set<UInt64> = [], start: Start? = nil,
        held: [String: [UInt8]] = [:], opened: [String: LogLines] = [:], each: ((UInt64, ArraySlice<UInt8>, [UInt8]) -> Void)? = nil
    ) throws -> Summary {
        var verifier = EventLogVerifier(keepTree: keepTree, rootsAt: rootsAt, start: start)
        for (index, file) in files.enumerated() where !verifier.broken {
            let last = index == files.count - 1
            var number = 0
            func check(_ line: ArraySlice<UInt8>, final: Bool) {
                number += 1
                let before = verifier.summary.lines
                verifier.check(line, file: file, number: number, final: final)
                if let each, verifier.summary.lines > before, let chain = verifier.summary.chain { each(chain.next - 1, line, chain.last) }
            }
            if let bytes = held[file] {
                var start = 0
                while start < bytes.count, !verifier.broken {
                    let end = bytes[start...].firstIndex(of: 0x0A)
                    check(bytes[start..<(end ?? bytes.count)], final: end == nil && last)
                    start = (end ?? bytes.count) + 1
                }
                continue
            }
            // A line longer than any record (zeros a crash left) is checked as its first 1 MiB: no
            // record either way.
            let lines = try opened[file] ?? LogLines(path: file, cutting: true)
            defer { lines.close() }  // not a caller's descriptor: only one it opened here
            while !verifier.broken, let line = try lines.next() { check(line, final: false) }
            if !verifier.broken && !lines.rest.isEmpty { check(lines.rest, final: last) }
        }
        verifier.finish()
        return verifier.summary
    }

    /// A log file's bytes (a `.gz` one through `gzip -dc`).
    public static func contents(of file: String) throws -> [UInt8] {
        guard file.hasSuffix(".gz") else { return try FileContents.read(file, limit: .max) }  // "cannot read FILE: REASON"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc", file]
        let finished = try process.runToEnd()
        guard finished.succeeded else {
            let said = String(decoding: finished.errorOutput, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw FileContents.Unreadable(path: file, reason: "gzip -dc failed: \(Printable.safe(said, maxBytes: 200))")
        }
        return [UInt8](finished.output)
    }

    /// The files of the log at `path`, oldest first: logrotate's, then `path` itself. logrotate
    /// names a moved file `path.N` (highest N oldest) or, with `dateext` (the default in Fedora's,
    /// RHEL's and SUSE's logrotate.conf), `path-20261205` or whatever its `dateformat` makes of
    /// digits and separators, which logrotate requires to sort as text by age (`path.20261205`, more
    /// than six digits after a dot, is such a date, not a number); either with `.gz`.
    /// Numbered files come before dated ones (a log switched to `dateext`, not back).
    public static func files(of path: String) -> [String] {
        let directory = PathText.directory(of: path)
        let name = (path as NSString).lastPathComponent
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
        var numbered: [(Int, String)] = []
        var dated: [(Substring, String)] = []
        for entry in entries where entry.hasPrefix(name) {
            var suffix = entry.dropFirst(name.count)
            if suffix.hasSuffix(".gz") { suffix = suffix.dropLast(3) }
            let file = (directory as NSString).appendingPathComponent(entry)
            // More than six digits is no count of logrotate's but a date or time (`dateformat .%Y%m%d`, `.%s`).
            if suffix.first == ".", suffix.count <= 7, let n = Int(suffix.dropFirst()), n >= 0 {
                numbered.append((n, file))
            } else if let first = suffix.first, "-_.".contains(first), suffix.dropFirst().first?.isNumber == true,
                suffix.allSatisfy({ $0.isASCII && ($0.isNumber || "-_.".contains($0)) })
            {
                dated.append((suffix, file))
            }
        }
        return numbered.sorted { $0.0 > $1.0 }.map(\.1) + dated.sorted { $0.0 < $1.0 }.map(\.1)
            + (FileManager.default.fileExists(atPath: path) ? [path] : [])
    }
}
