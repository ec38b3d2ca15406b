import Foundation
public import RISCCore

/// The RFC 9162 Merkle tree hash of the event log's lines (its leaves are the lines' leaf hashes,
/// `EventLogChain.leafHash`), kept as a compact range: the roots of the perfect subtrees that
/// make up the tree so far, largest first. Appending is O(log n) and so is the root.
public struct MerkleRange: Sendable, Equatable {
    public private(set) var size: UInt64 = 0
    private var roots: [[UInt8]] = []

    public init() {}

    /// A range as `compactRoots` gave it; nil when the roots are not those of a tree of `size`
    /// leaves (one root per bit set in `size`, each a SHA-256).
    public init?(size: UInt64, roots: [[UInt8]]) {
        guard roots.count == size.nonzeroBitCount, roots.allSatisfy({ $0.count == 32 }) else { return nil }
        self.size = size
        self.roots = roots
    }

    /// The roots of the perfect subtrees, largest first: with `size`, all a later writer or
    /// verifier needs to go on with the tree (a segment's digest keeps them).
    public var compactRoots: [[UInt8]] { roots }

    /// Adds a leaf hash.
    public mutating func append(leaf: [UInt8]) {
        var hash = leaf
        var remaining = size
        while remaining & 1 == 1 {
            hash = Self.nodeHash(roots.removeLast(), hash)
            remaining >>= 1
        }
        roots.append(hash)
        size += 1
    }

    /// MTH of the leaves so far (RFC 9162 §2.1.1; SHA-256 of nothing for none).
    public var root: [UInt8] {
        guard var hash = roots.last else { return SHA256.hash([UInt8]()) }
        for left in roots.dropLast().reversed() { hash = Self.nodeHash(left, hash) }
        return hash
    }

    static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { SHA256.hash([0x01] + left + right) }
}

/// A checkpoint of the event log as a C2SP signed note (`c2sp.org/tlog-checkpoint`,
/// `c2sp.org/signed-note`): the log's origin, its size (lines from the genesis) and the Merkle
/// root, with a time extension line, signed with Ed25519.
public struct EventLogCheckpoint: Sendable, Equatable {
    public var origin: String
    public var size: UInt64
    public var root: [UInt8]
    /// When it was made (an extension line, `risc-time <RFC 3339>`).
    public var time: Double

    public init(origin: String, size: UInt64, root: [UInt8], time: Double) {
        (self.origin, self.size, self.root, self.time) = (origin, size, root, time)
    }

    /// The signed text: origin, size, root (base64), the time line, each with its newline.
    public var body: String {
        "\(origin)\n\(size)\n\(Base64URL.encodeStandard(root))\nrisc-time \(Timestamp.iso8601(time))\n"
    }

    /// The whole note: the body, a blank line, and the signature line.
    public func signed(by key: CheckpointKey) throws -> String {
        let signature = try key.privateKey.sign(Array(body.utf8), algorithm: .eddsa)
        return body + "\n\u{2014} \(key.name) \(Base64URL.encodeStandard(key.keyID + signature))\n"
    }

    /// Why a note was not accepted.
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Parses a signed note's checkpoint, without checking a signature (`verify` does).
    public static func parse(note: String) throws(Invalid) -> EventLogCheckpoint {
        try parsed(note).checkpoint
    }

    private static func parsed(_ note: String) throws(Invalid) -> (checkpoint: EventLogCheckpoint, body: String, signatures: Substring) {
        guard let split = note.range(of: "\n\n") else { throw Invalid("not a signed note: no blank line before the signatures") }
        let body = String(note[..<split.lowerBound]) + "\n"
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        guard lines.count >= 3, let size = UInt64(lines[1]), let root = Data(base64Encoded: lines[2]).map(Array.init), root.count == 32 else {
            throw Invalid("not a checkpoint: origin, size and root expected")
        }
        var time = 0.0
        for line in lines.dropFirst(3) where line.hasPrefix("risc-time ") {
            time = Timestamp.parse(line.dropFirst("risc-time ".count)) ?? 0
        }
        return (EventLogCheckpoint(origin: lines[0], size: size, root: root, time: time), body, note[split.upperBound...])
    }

    /// Parses a signed note and checks its signature with `key` (a signature line by another key
    /// name or ID is ignored; none by `key` is invalid).
    public static func verify(note: String, key: CheckpointVerifier) throws(Invalid) -> EventLogCheckpoint {
        let (checkpoint, body, signatures) = try parsed(note)
        var signed = false
        for line in signatures.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == "\u{2014}", parts[1] == key.name, let blob = Data(base64Encoded: String(parts[2])).map(Array.init),
                blob.count == 68, Array(blob.prefix(4)) == key.keyID
            else { continue }
            guard key.publicKey.verify(signature: Array(blob.dropFirst(4)), message: ArraySlice(body.utf8), algorithm: .eddsa) else {
                throw Invalid("the signature by \(key.name) does not verify")
            }
            signed = true
        }
        guard signed else { throw Invalid("no signature by \(key.name) (key ID \(key.keyID.lowercaseHex))") }
        return checkpoint
    }
}

/// The C2SP key ID: the first four bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key).
func checkpointKeyID(name: String, publicKey raw: [UInt8]) -> [UInt8] {
    Array(SHA256.hash(Array(name.utf8) + [0x0A, 0x01] + raw).prefix(4))
}

/// The key that signs checkpoints: an Ed25519 private key (PEM, mode 0600, outside the data
/// directory) and its name.
public struct CheckpointKey: Sendable {
    public let name: String
    public let privateKey: PrivateKey
    public let keyID: [UInt8]
    /// The public key as a C2SP verifier key: `name+hexID+base64(0x01 ‖ key)`, what an auditor keeps.
    public let verifierKey: String

    public init(name: String, privateKey: PrivateKey) throws {
        guard !name.isEmpty, !name.contains(where: { $0 == "+" || $0.isWhitespace }) else {
            throw EventLogCheckpoint.Invalid("a key name is one word without '+'")
        }
        guard let x = privateKey.publicKey.jwk(keyID: nil, algorithm: nil)["x"]?.stringValue, let raw = Base64URL.decode(x), raw.count == 32 else {
            throw EventLogCheckpoint.Invalid("the checkpoint key must be Ed25519")
        }
        self.name = name
        self.privateKey = privateKey
        self.keyID = checkpointKeyID(name: name, publicKey: raw)
        self.verifierKey = "\(name)+\(keyID.lowercaseHex)+\(Base64URL.encodeStandard([0x01] + raw))"
    }
}

/// A verifier key (`name+hexID+base64(0x01 ‖ key)`), as `CheckpointKey.verifierKey` prints it.
public struct CheckpointVerifier: Sendable {
    public let name: String
    public let keyID: [UInt8]
    public let publicKey: PublicKey

    public init(_ text: String) throws {
        let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "+", maxSplits: 2)
        guard parts.count == 3, parts[1].count == 8, let blob = Data(base64Encoded: String(parts[2])).map(Array.init), blob.count == 33,
            blob[0] == 0x01
        else { throw EventLogCheckpoint.Invalid("not a verifier key (name+hexID+base64 of an Ed25519 key)") }
        let raw = Array(blob.dropFirst())
        let id = checkpointKeyID(name: String(parts[0]), publicKey: raw)
        guard id.lowercaseHex == parts[1] else { throw EventLogCheckpoint.Invalid("the verifier key's ID does not match its key") }
        self.name = String(parts[0])
        self.keyID = id
        self.publicKey = try PublicKey(ed25519: raw)
    }
}

extension CheckpointKey {
    /// The key file's first line, before the PEM: `risc checkpoint key: NAME` (OpenSSL's PEM
    /// reader skips it), so the name that signs always goes with the key.
    static let nameLine = "risc checkpoint key: "

    /// A new Ed25519 key named `name`, as its file's text (mode 0600 is the caller's).
    public static func generate(name: String) throws -> (key: CheckpointKey, file: String) {
        let key = try CheckpointKey(name: name, privateKey: try PrivateKey.generate(.ed25519))
        return (key, nameLine + name + "\n" + (try key.privateKey.pemRepresentation))
    }

    /// The key in a file `generate` wrote.
    public init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EventLogCheckpoint.Invalid("cannot read the checkpoint key \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        guard text.hasPrefix(Self.nameLine), let newline = text.firstIndex(of: "\n") else {
            throw EventLogCheckpoint.Invalid("\(path) is not a checkpoint key (risc keys checkpoint-key makes one)")
        }
        let name = String(text[text.index(text.startIndex, offsetBy: Self.nameLine.count)..<newline])
        try self.init(name: name, privateKey: try PrivateKey(pem: String(text[text.index(after: newline)...])))
    }
}

/// RFC 9162 §2.1.3 inclusion proofs: that one line is in the tree a checkpoint signed.
public enum InclusionProof {
    /// PATH(m, D[n]): the sibling hashes from leaf `index` up to the root of `leaves`.
    public static func path(index: Int, leaves: ArraySlice<[UInt8]>) -> [[UInt8]] {
        guard var nodes = try? Nodes(size: UInt64(leaves.count), prefix: nil, proving: [UInt64(index)]) else { return [] }
        for leaf in leaves { nodes.append(leaf: leaf) }
        return (try? nodes.finish().path(UInt64(index))) ?? []
    }

    /// A node of the RFC 9162 tree: the leaves `lo..<hi`.
    struct Span: Hashable {
        let lo: UInt64
        let hi: UInt64
    }

    /// The nodes of a tree of `size` leaves that the root and the paths of some leaves need, hashed
    /// as the leaves go by, each once (a log of millions of lines is proved with the memory of a few
    /// paths, never holding its leaves). The first leaves may be gone (retention deleted their
    /// segments) and known by the compact range a digest kept of them (`prefix`): every sibling on
    /// the path of a later leaf is a subtree of later leaves, one of the prefix's roots, or such
    /// roots followed by later leaves, so the path can still be made.
    struct Nodes {
        let size: UInt64
        private var needed: Set<Span> = []
        private var hashes: [Span: [UInt8]] = [:]
        /// The perfect subtrees so far, largest first (a compact range with where each begins).
        private var stack: [(lo: UInt64, count: UInt64, hash: [UInt8])] = []
        /// The index of the next leaf.
        private(set) var next: UInt64 = 0

        init(size: UInt64, prefix: MerkleRange?, proving indices: [UInt64]) throws(EventLogCheckpoint.Invalid) {
            self.size = size
            needed.insert(Span(lo: 0, hi: size))
            for index in indices { Self.siblings(index, 0, size, into: &needed) }
            var bit: UInt64 = 1 << 63
            for hash in prefix?.compactRoots ?? [] {
                while prefix!.size & bit == 0 { bit >>= 1 }
                push(next, bit, hash)
                next += bit
                bit >>= 1
            }
        }

        /// The spans PATH(index, D[lo:hi]) takes the hashes of (RFC 9162 §2.1.3.1).
        private static func siblings(_ index: UInt64, _ lo: UInt64, _ hi: UInt64, into spans: inout Set<Span>) {
            guard hi - lo > 1 else { return }
            let k = split(lo, hi)
            if index < lo + k {
                spans.insert(Span(lo: lo + k, hi: hi))
                siblings(index, lo, lo + k, into: &spans)
            } else {
                spans.insert(Span(lo: lo, hi: lo + k))
                siblings(index, lo + k, hi, into: &spans)
            }
        }

        /// The largest power of two below `hi - lo` (more than one leaf): where D[lo:hi] splits.
        private static func split(_ lo: UInt64, _ hi: UInt64) -> UInt64 { 1 << (63 - UInt64((hi - lo - 1).leadingZeroBitCount)) }

        private mutating func push(_ lo: UInt64, _ count: UInt64, _ hash: [UInt8]) {
            stack.append((lo, count, hash))
            if needed.contains(Span(lo: lo, hi: lo + count)) { hashes[Span(lo: lo, hi: lo + count)] = hash }
        }

        /// The next leaf's hash; subtrees it completes are hashed now.
        mutating func append(leaf: [UInt8]) {
            push(next, 1, leaf)
            next += 1
            while stack.count > 1, stack[stack.count - 1].count == stack[stack.count - 2].count {
                let right = stack.removeLast(), left = stack.removeLast()
                push(left.lo, left.count * 2, MerkleRange.nodeHash(left.hash, right.hash))
            }
        }

        /// After the last leaf: the nodes along the tree's right edge, from the subtrees that make it up.
        func finish() throws(EventLogCheckpoint.Invalid) -> Nodes {
            guard next == size else { throw EventLogCheckpoint.Invalid("the log gave \(next) of the tree's \(size) lines") }
            var done = self
            for span in needed where done.hashes[span] == nil {
                guard span.hi == size, let first = stack.firstIndex(where: { $0.lo == span.lo }) else {
                    throw EventLogCheckpoint.Invalid("leaves \(span.lo)–\(span.hi - 1) cross a subtree the digest kept whole: no path through them")
                }
                var hash = stack[stack.count - 1].hash
                for left in stack[first..<(stack.count - 1)].reversed() { hash = MerkleRange.nodeHash(left.hash, hash) }
                done.hashes[span] = hash
            }
            return done
        }

        /// MTH of every leaf (after `finish`).
        var root: [UInt8] { hashes[Span(lo: 0, hi: size)] ?? [] }

        /// PATH(index, D[0:size]) of a leaf given at `init` (after `finish`).
        func path(_ index: UInt64) throws(EventLogCheckpoint.Invalid) -> [[UInt8]] {
            var path: [[UInt8]] = []
            var (lo, hi) = (UInt64(0), size)
            while hi - lo > 1 {
                let k = Self.split(lo, hi)
                let sibling = index < lo + k ? Span(lo: lo + k, hi: hi) : Span(lo: lo, hi: lo + k)
                guard let hash = hashes[sibling] else { throw EventLogCheckpoint.Invalid("no hash of leaves \(sibling.lo)–\(sibling.hi - 1)") }
                path.insert(hash, at: 0)
                (lo, hi) = index < lo + k ? (lo, lo + k) : (lo + k, hi)
            }
            return path
        }
    }

    /// RFC 9162 §2.1.3.2: whether `leaf` at `index` with `path` gives `root` for a tree of `size`.
    public static func verify(leaf: [UInt8], index: UInt64, size: UInt64, path: [[UInt8]], root: [UInt8]) -> Bool {
        guard index < size else { return false }
        var fn = index, sn = size - 1, hash = leaf
        for sibling in path {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                hash = MerkleRange.nodeHash(sibling, hash)
                if fn & 1 == 0 {
                    while fn & 1 == 0 && fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                hash = MerkleRange.nodeHash(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && hash == root
    }
}
