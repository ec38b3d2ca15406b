import Foundation
import RISCCore

/// A closed segment of the event log, as its digest file says (issue 28, after CloudTrail's digest
/// files): which file, its SHA-256, the `seq` range and times of its lines, where the chain and
/// the Merkle tree stood at its end, the previous digest's hash (so digests chain too), and the
/// segments whose files retention deleted when this one closed. Signed like a checkpoint (a C2SP
/// note, Ed25519) when risc has a checkpoint key.
public struct EventLogSegmentDigest: Sendable, Equatable {
    public var origin: String
    public var number: Int
    public var file: String
    public var sha256: [UInt8]
    public var firstSeq: UInt64
    public var lastSeq: UInt64
    public var lines: Int
    /// The `time` of its first and last lines, as written there.
    public var firstTime: String
    public var lastTime: String
    /// When risc closed it (Unix seconds): what retention goes by.
    public var closed: Double
    /// The leaf hash of its last line: the next segment's first `prev`.
    public var lastLeaf: [UInt8]
    /// The tree of every line from the genesis to its end; nil when it could not be computed (a
    /// log whose first files were gone before segments began).
    public var tree: MerkleRange?
    /// SHA-256 of the previous digest's file; nil for the first.
    public var previous: [UInt8]?
    /// Segments whose log files retention deleted when this one closed.
    public var expired: [Int] = []

    /// The signed text, each line with its newline.
    public var body: String {
        var text = "\(origin)\nsegment \(number)\nfile \(file)\nsha256 \(Base64URL.encodeStandard(sha256))\n"
        text += "seq \(firstSeq) \(lastSeq)\nlines \(lines)\ntime \(firstTime) \(lastTime)\nclosed \(Int64(closed))\n"
        text += "last \(Base64URL.encodeStandard(lastLeaf))\n"
        if let tree {
            text += (["tree", "\(tree.size)"] + tree.compactRoots.map { Base64URL.encodeStandard($0) }).joined(separator: " ") + "\n"
        } else {
            text += "tree -\n"
        }
        text += "prev \(previous.map { Base64URL.encodeStandard($0) } ?? "-")\n"
        for number in expired { text += "expired \(number)\n" }
        return text
    }

    /// The file's text: the body, and with `key` a blank line and its signature line.
    public func text(signedBy key: CheckpointKey?) throws -> String {
        guard let key else { return body }
        let signature = try key.privateKey.sign(Array(body.utf8), algorithm: .eddsa)
        return body + "\n\u{2014} \(key.name) \(Base64URL.encodeStandard(key.keyID + signature))\n"
    }

    /// Reads a digest file's text; `key`: the signature must verify with it.
    public static func parse(_ text: String, key: CheckpointVerifier? = nil) throws(EventLogCheckpoint.Invalid) -> EventLogSegmentDigest {
        let parts = text.components(separatedBy: "\n\n")
        let body = parts[0].hasSuffix("\n") ? parts[0] : parts[0] + "\n"
        if let key {
            guard parts.count == 2, let signature = parts[1].split(separator: "\n").first,
                case let fields = signature.split(separator: " "), fields.count == 3, fields[0] == "\u{2014}", fields[1] == key.name,
                let blob = Data(base64Encoded: String(fields[2])).map(Array.init), blob.count == 68, Array(blob.prefix(4)) == key.keyID,
                key.publicKey.verify(signature: Array(blob.dropFirst(4)), message: ArraySlice(body.utf8), algorithm: .eddsa)
            else { throw EventLogCheckpoint.Invalid("no valid signature by \(key.name)") }
        }
        var fields: [String: [Substring]] = [:]
        var expired: [Int] = []
        let lines = body.split(separator: "\n")
        guard let origin = lines.first else { throw EventLogCheckpoint.Invalid("an empty digest") }
        for line in lines.dropFirst() {
            let words = line.split(separator: " ")
            guard let name = words.first else { continue }
            if name == "expired", words.count == 2, let number = Int(words[1]) { expired.append(number) } else { fields[String(name)] = Array(words.dropFirst()) }
        }
        func one(_ name: String) throws(EventLogCheckpoint.Invalid) -> Substring {
            guard let value = fields[name], value.count == 1 else { throw EventLogCheckpoint.Invalid("the digest has no \(name) line") }
            return value[0]
        }
        func hash(_ text: Substring) throws(EventLogCheckpoint.Invalid) -> [UInt8] {
            guard let bytes = Data(base64Encoded: String(text)).map(Array.init), bytes.count == 32 else {
                throw EventLogCheckpoint.Invalid("the digest holds a hash that is not 32 bytes of base64")
            }
            return bytes
        }
        guard let number = Int(try one("segment")), let seq = fields["seq"], seq.count == 2, let first = UInt64(seq[0]), let last = UInt64(seq[1]),
            let count = Int(try one("lines")), let time = fields["time"], time.count == 2, let closed = Double(try one("closed")),
            let treeWords = fields["tree"], !treeWords.isEmpty
        else { throw EventLogCheckpoint.Invalid("the digest's segment, seq, lines, time, closed or tree line is not well formed") }
        var tree: MerkleRange?
        if treeWords != ["-"] {
            var roots: [[UInt8]] = []
            for word in treeWords.dropFirst() { roots.append(try hash(word)) }
            guard let size = UInt64(treeWords[0]), let range = MerkleRange(size: size, roots: roots) else {
                throw EventLogCheckpoint.Invalid("the digest's tree line is not a tree")
            }
            tree = range
        }
        let previous = try one("prev")
        return EventLogSegmentDigest(
            origin: String(origin), number: number, file: String(try one("file")), sha256: try hash(try one("sha256")), firstSeq: first,
            lastSeq: last, lines: count, firstTime: String(time[0]), lastTime: String(time[1]), closed: closed,
            lastLeaf: try hash(try one("last")), tree: tree, previous: previous == "-" ? nil : try hash(previous), expired: expired)
    }

    /// Where the chain (and tree) stands after this segment: a verification of the next goes on from it.
    public var end: EventLogVerifier.Start {
        EventLogVerifier.Start(
            chain: EventLogChain(next: lastSeq + 1, last: lastLeaf), tree: tree,
            logID: origin.hasPrefix(EventLogSegments.originPrefix) ? String(origin.dropFirst(EventLogSegments.originPrefix.count)) : nil)
    }
}

/// risc's own rotation of the event log into segments: `events.log` is the one being written;
/// a closed one is `events-NNNNNN.log` with its digest `events-NNNNNN.digest` beside it.
public enum EventLogSegments {
    public static let originPrefix = "risc-event-log-segment/"

    /// When the log is rotated and how long closed segments are kept.
    public struct Settings: Sendable {
        /// Rotate once the file holds this many bytes (0: not by size).
        public var maxBytes: Int64
        /// Rotate once the file's first line is this many seconds old (0: not by time).
        public var interval: Double
        /// Delete a closed segment's file this many seconds after it closed (0: keep); its digest stays.
        public var retention: Double
        /// Signs the digests (the checkpoint key), when risc has one.
        public var key: CheckpointKey?

        public init(maxBytes: Int64 = 0, interval: Double = 0, retention: Double = 0, key: CheckpointKey? = nil) {
            (self.maxBytes, self.interval, self.retention, self.key) = (maxBytes, interval, retention, key)
        }

        public var rotates: Bool { maxBytes > 0 || interval > 0 }
    }

    /// `events-NNNNNN.log` (`kind` "log") or `.digest` beside the log at `path`.
    public static func file(of path: String, number: Int, kind: String) -> String {
        let directory = PathText.directory(of: path)
        let stem = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        return (directory as NSString).appendingPathComponent(String(format: "%@-%06d.%@", stem, number, kind))
    }

    /// The segments beside the log at `path`: by number, its log file and digest file where present.
    public static func discover(_ path: String) -> [Int: (log: String?, digest: String?)] {
        let directory = PathText.directory(of: path)
        let stem = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        var found: [Int: (log: String?, digest: String?)] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? [] where entry.hasPrefix(stem + "-") {
            let rest = entry.dropFirst(stem.count + 1)
            guard let dot = rest.firstIndex(of: "."), let number = Int(rest[..<dot]), rest[..<dot].count == 6 else { continue }
            let full = (directory as NSString).appendingPathComponent(entry)
            switch rest[rest.index(after: dot)...] {
            case "log": found[number, default: (nil, nil)].log = full
            case "digest": found[number, default: (nil, nil)].digest = full
            default: continue
            }
        }
        return found
    }

    /// The newest digest beside the log at `path`, and the SHA-256 of its file.
    public static func newestDigest(_ path: String) throws -> (digest: EventLogSegmentDigest, hash: [UInt8])? {
        guard let file = discover(path).filter({ $0.value.digest != nil }).max(by: { $0.key < $1.key })?.value.digest,
            let data = FileManager.default.contents(atPath: file)
        else { return nil }
        return (try EventLogSegmentDigest.parse(String(decoding: data, as: UTF8.self)), SHA256.hash([UInt8](data)))
    }

    /// Closes the log file at `path` (its writer has closed it): renames it to the next segment,
    /// then writes that segment's digest and deletes the files of segments past
    /// `settings.retention` (named in the digest first), `now` being the log's clock's time. Returns the new digest; throws when the
    /// file is not a chain that goes on from the previous digest (the file then stays where it is).
    public static func close(_ path: String, logID: String, settings: Settings, now: Double) throws -> EventLogSegmentDigest {
        let segments = discover(path)
        let previous = try newestDigest(path)
        let number = max(segments.keys.max() ?? 0, previous?.digest.number ?? 0) + 1
        let read = try summarise(path, previous: previous, withRotated: previous == nil)  // a broken chain is not rotated
        let target = file(of: path, number: number, kind: "log")
        guard rename(path, target) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return try seal(target, number: number, path: path, logID: logID, previous: previous, settings: settings, now: now, read: read)
    }

    /// A rotation cut off between the rename and the digest (a crash): the segment's digest is
    /// written now. Nil when there was none to finish.
    public static func recover(_ path: String, logID: String, settings: Settings, now: Double) throws -> EventLogSegmentDigest? {
        let segments = discover(path)
        guard let newest = segments.keys.max(), let log = segments[newest]?.log, segments[newest]?.digest == nil else { return nil }
        let previous = try newestDigest(path)
        return try seal(log, number: newest, path: path, logID: logID, previous: previous, settings: settings, now: now)
    }

    /// Reads the segment `file` (and, before the first digest, the log's logrotate files before
    /// it) from where `previous` left the chain.
    private static func summarise(
        _ file: String, previous: (digest: EventLogSegmentDigest, hash: [UInt8])?, withRotated: Bool, logPath: String? = nil
    ) throws -> (summary: EventLogVerifier.Summary, bytes: [UInt8], last: [UInt8]) {
        let bytes = try EventLogVerifier.contents(of: file)
        let files = withRotated ? logrotateFiles(of: logPath ?? file) + [file] : [file]
        var last: [UInt8] = []
        let summary = try EventLogVerifier.verify(
            files: files, keepTree: true, start: previous?.digest.end, held: [file: bytes]
        ) { _, line, _ in last = Array(line) }
        if let problem = summary.problem { throw EventLogCheckpoint.Invalid("the event log's chain is broken, not rotated: \(problem)") }
        guard summary.chain != nil, !last.isEmpty else { throw EventLogCheckpoint.Invalid("the event log holds no chained line, not rotated") }
        return (summary, bytes, last)
    }

    /// Writes the digest of the closed segment `target` (number `number`), then deletes what
    /// retention let go.
    private static func seal(
        _ target: String, number: Int, path: String, logID: String, previous: (digest: EventLogSegmentDigest, hash: [UInt8])?, settings: Settings,
        now: Double, read: (summary: EventLogVerifier.Summary, bytes: [UInt8], last: [UInt8])? = nil
    ) throws -> EventLogSegmentDigest {
        // Read once: `close` read it before the rename; `recover` reads it here.
        let (summary, bytes, lastLine) = try read ?? summarise(target, previous: previous, withRotated: previous == nil, logPath: path)
        let chain = summary.chain!
        let firstObject = try? JSONParser.parseObject(bytes.prefix { $0 != 0x0A })
        func time(_ object: JSONObject?) -> String { object?["time"]?.stringValue?.replacingOccurrences(of: " ", with: "_") ?? "-" }
        var expired: [Int] = []
        if settings.retention > 0 {
            for (old, files) in discover(path) where old != number && files.log != nil {
                guard let digestFile = files.digest, let data = FileManager.default.contents(atPath: digestFile),
                    let digest = try? EventLogSegmentDigest.parse(String(decoding: data, as: UTF8.self)), now - digest.closed >= settings.retention
                else { continue }
                expired.append(old)
            }
        }
        let firstSeq = previous.map { $0.digest.lastSeq + 1 } ?? firstObject?["seq"].flatMap(EventLogChain.sequenceNumber) ?? summary.firstSeq ?? 0
        let digest = EventLogSegmentDigest(
            origin: originPrefix + logID, number: number, file: (target as NSString).lastPathComponent, sha256: SHA256.hash(bytes),
            firstSeq: firstSeq, lastSeq: chain.next - 1, lines: Int(chain.next - firstSeq), firstTime: time(firstObject),
            lastTime: time(try? JSONParser.parseObject(lastLine)), closed: now, lastLeaf: chain.last, tree: summary.tree, previous: previous?.hash,
            expired: expired.sorted())
        try PrivateFiles.writeAtomically(file(of: path, number: number, kind: "digest"), Array(try digest.text(signedBy: settings.key).utf8))
        for old in expired { unlink(file(of: path, number: old, kind: "log")) }
        return digest
    }

    /// Verifies the log at `path` with its segments (`risc log verify`): every digest (signed with
    /// `key` when given, each naming the one before it), every segment's file against its digest
    /// (or named expired by a later digest), the chain through the files that are there (each
    /// segment from where the digest before it left the chain and tree), then the file being
    /// written. A log without segments is its logrotate files and itself, from its genesis.
    public static func verify(_ path: String, key: CheckpointVerifier? = nil, rootsAt: Set<UInt64> = []) throws -> EventLogVerifier.Summary {
        let found = discover(path)
        guard let newest = found.keys.max() else { return try EventLogVerifier.verify(files: EventLogVerifier.files(of: path), rootsAt: rootsAt) }
        func broken(_ reason: EventLogVerifier.Reason, _ file: String, _ detail: String, seq: UInt64? = nil) -> EventLogVerifier.Summary {
            var summary = EventLogVerifier.Summary()
            summary.problem = .init(reason: reason, file: file, line: 0, seq: seq, detail: detail)
            return summary
        }
        var digests: [Int: EventLogSegmentDigest] = [:]
        var previous: (digest: EventLogSegmentDigest, hash: [UInt8])?
        for number in 1...newest {
            let expected = file(of: path, number: number, kind: "digest")
            guard let digestFile = found[number]?.digest, let data = FileManager.default.contents(atPath: digestFile) else {
                return broken(.digestChainBroken, expected, "segment \(number) has no digest")
            }
            let digest: EventLogSegmentDigest
            do {
                digest = try EventLogSegmentDigest.parse(String(decoding: data, as: UTF8.self), key: key)
            } catch {
                let unsigned = (try? EventLogSegmentDigest.parse(String(decoding: data, as: UTF8.self))) != nil
                return broken(unsigned ? .digestSigInvalid : .digestChainBroken, digestFile, "\(error)")
            }
            if digest.number != number || digest.previous != previous?.hash || (previous.map { digest.firstSeq != $0.digest.lastSeq + 1 } ?? false)
                || (previous.map { digest.origin != $0.digest.origin } ?? false)
            {
                return broken(.digestChainBroken, digestFile, "does not go on from the digest of segment \(number - 1)", seq: digest.firstSeq)
            }
            digests[number] = digest
            previous = (digest, SHA256.hash([UInt8](data)))
        }
        let expired = Set(digests.values.flatMap(\.expired))
        var total = EventLogVerifier.Summary()
        func merge(_ part: EventLogVerifier.Summary) {
            if total.firstSeq == nil { (total.firstSeq, total.logID) = (part.firstSeq, part.logID) }
            total.lines += part.lines
            total.unchained += part.unchained
            total.lastSeq = part.lastSeq ?? total.lastSeq
            total.torn += part.torn
            total.chain = part.chain ?? total.chain
            total.tree = part.tree
            total.roots.merge(part.roots) { $1 }
            total.problem = total.problem ?? part.problem
        }
        for number in 1...newest {
            let digest = digests[number]!
            guard let log = found[number]?.log else {
                if expired.contains(number) { continue }
                return broken(.segmentMissing, file(of: path, number: number, kind: "log"), "segment \(number) (seq \(digest.firstSeq)–\(digest.lastSeq)) is gone", seq: digest.firstSeq)
            }
            let bytes = try EventLogVerifier.contents(of: log)
            let part = try EventLogVerifier.verify(
                files: number == 1 ? logrotateFiles(of: path) + [log] : [log], rootsAt: rootsAt, start: number == 1 ? nil : digests[number - 1]!.end,
                held: [log: bytes])
            merge(part)
            if total.problem != nil { return total }
            if SHA256.hash(bytes) != digest.sha256 || part.chain?.last != digest.lastLeaf || part.lastSeq != digest.lastSeq {
                total.problem = .init(reason: .segmentHashMismatch, file: log, line: 0, seq: digest.firstSeq, detail: "not the file segment \(number)'s digest hashed")
                return total
            }
        }
        if FileManager.default.fileExists(atPath: path) {
            merge(try EventLogVerifier.verify(files: [path], rootsAt: rootsAt, start: digests[newest]!.end))
        } else {
            total.chain = total.chain ?? digests[newest]!.end.chain
            total.tree = total.tree ?? digests[newest]!.tree
        }
        if total.logID == nil { total.logID = digests[newest]!.end.logID }
        return total
    }

    /// The log's files that are there, oldest first: logrotate's, risc's segments, the one being written.
    public static func files(of path: String) -> [String] {
        let found = discover(path)
        return logrotateFiles(of: path) + found.keys.sorted().compactMap { found[$0]?.log }
            + (FileManager.default.fileExists(atPath: path) ? [path] : [])
    }

    /// logrotate's files of the log at `path` (from before risc rotated it, or with risc's rotation off), oldest first.
    static func logrotateFiles(of path: String) -> [String] { EventLogVerifier.files(of: path).filter { $0 != path } }
}
