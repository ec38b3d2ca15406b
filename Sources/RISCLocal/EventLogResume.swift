import Foundation
import RISCCore

/// Where the event log's chain and Merkle tree stood at its last checkpoint, and where in which
/// file that line ended (`DATA_DIR/events.resume`, written with each checkpoint): a writer that
/// signs checkpoints starts from here, reading only the lines written since, instead of every
/// line from the genesis (7 s a gigabyte, every start, for a log that logrotate rotates). Only a
/// shortcut: when the file is not the one named (rotated, copied and truncated), is shorter, or its
/// lines from there do not go on from the chain recorded, the writer reads the log from its genesis
/// as before. What it skips is for `risc log verify` to read; an edit there does not change the
/// tree the next checkpoints sign, so the audit finds it.
package struct EventLogResume: Equatable {
    var chain: EventLogChain
    var tree: MerkleRange
    /// The file's device and inode, and the offset just past the line before `chain.next`.
    var device: UInt64
    var inode: UInt64
    var offset: Int64

    static func path(of log: String) -> String { (PathText.directory(of: log) as NSString).appendingPathComponent("events.resume") }

    var text: String {
        let roots = tree.compactRoots.map { " " + Base64URL.encodeStandard($0) }.joined()
        return "risc event log resume 1\nchain \(chain.next) \(Base64URL.encodeStandard(chain.last))\ntree \(tree.size)\(roots)\n"
            + "file \(device) \(inode) \(offset)\n"
    }

    init(chain: EventLogChain, tree: MerkleRange, device: UInt64, inode: UInt64, offset: Int64) {
        (self.chain, self.tree, self.device, self.inode, self.offset) = (chain, tree, device, inode, offset)
    }

    /// nil for anything but what `text` writes.
    package init?(text: String) {
        let lines = text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        func hash(_ word: String) -> [UInt8]? { Data(base64Encoded: word).map(Array.init).flatMap { $0.count == 32 ? $0 : nil } }
        guard lines.count == 4, lines[0] == ["risc", "event", "log", "resume", "1"],
            lines[1].count == 3, lines[1][0] == "chain", let next = UInt64(lines[1][1]), let last = hash(lines[1][2]),
            lines[2].count >= 2, lines[2][0] == "tree", let size = UInt64(lines[2][1]), size == next,
            case let roots = lines[2].dropFirst(2).compactMap(hash), roots.count == lines[2].count - 2,
            let tree = MerkleRange(size: size, roots: roots),
            lines[3].count == 4, lines[3][0] == "file", let device = UInt64(lines[3][1]), let inode = UInt64(lines[3][2]),
            let offset = Int64(lines[3][3]), offset >= 0
        else { return nil }
        self.init(chain: EventLogChain(next: next, last: last), tree: tree, device: device, inode: inode, offset: offset)
    }

    /// Records where `fd` (the log's file, every line up to `chain` written) ends.
    static func write(log: String, fd: Int32, chain: EventLogChain, tree: MerkleRange) {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return }
        let state = EventLogResume(chain: chain, tree: tree, device: UInt64(status.st_dev), inode: UInt64(status.st_ino), offset: Int64(status.st_size))
        try? PrivateFiles.writeAtomically(path(of: log), Array(state.text.utf8))
    }

    /// The tree of the log at `log` whose chain ends at `end`, from the recorded state and the lines
    /// written after it; nil when the state is missing or does not fit the file (see the type).
    static func tree(log: String, end: EventLogChain) -> MerkleRange? {
        // A few hundred bytes when risc wrote it: anything past 64 KiB is not its state.
        guard let data = try? FileContents.read(path(of: log), regularFile: true, limit: 1 << 16),
            let state = EventLogResume(text: String(decoding: data, as: UTF8.self)),
            state.chain.next <= end.next
        else { return nil }
        guard let handle = FileHandle(forReadingAtPath: log) else { return nil }
        defer { try? handle.close() }
        var status = stat()
        guard fstat(handle.fileDescriptor, &status) == 0, UInt64(status.st_dev) == state.device, UInt64(status.st_ino) == state.inode,
            Int64(status.st_size) >= state.offset, (try? handle.seek(toOffset: UInt64(state.offset))) != nil
        else { return nil }
        guard
            let summary = try? EventLogVerifier.verify(
                files: [log], keepTree: true, start: .init(chain: state.chain, tree: state.tree, logID: nil),
                opened: [log: LogLines(handle: handle, path: log, cutting: true)]),
            summary.problem == nil, summary.chain == end, let tree = summary.tree, tree.size == end.next
        else { return nil }
        return tree
    }
}
