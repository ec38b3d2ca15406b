import Foundation
import RISCCore
import RISCLocal

/// Reading a log's files: the last lines of a file (back from its end, or through a pipe), a
/// rotated file that cannot be read, and the small helpers `risc tail` shares.
extension RiscCommand.Tail {
    /// The last `count` lines of the file that `render` shows, in file order, read backwards in
    /// chunks from its end (a log of hundreds of megabytes is not read whole to show 20 lines).
    /// A run of more than `longest` bytes without a newline (zeros a crash left, a file that is
    /// no log) is no line of the log's: it is passed over, not gathered. Leaves the handle at
    /// the end of the file (or `end`: the lines before it), where `--follow` goes on.
    static func lastLines<Shown>(
        _ count: Int, of handle: FileHandle, end: UInt64? = nil, chunk: Int = 1 << 16, longest: Int = 1 << 20, render: (Substring) -> Shown?
    ) throws -> [Shown] {
        guard isRegular(handle) else {  // a pipe (`--file <(…)`): read through, keeping the last
            return try lastLines(count, readingThrough: SourceLines(earlier: [], own: LogLines(handle: handle, path: "", longest: longest), withRest: true), render: render)
        }
        let end = try end ?? handle.seekToEnd()
        var position = end
        var carry: [UInt8] = []  // the end of the earliest line seen, whose start is further back
        var skipping = false  // inside a run longer than `longest`
        var found: [Shown] = []
        while found.count < count && position > 0 {
            let start = position - min(position, UInt64(chunk))
            try handle.seek(toOffset: start)
            var bytes = [UInt8](try handle.read(upToCount: Int(position - start)) ?? Data())
            position = start
            if !skipping { bytes += carry }
            var pieces = bytes.split(separator: 10, omittingEmptySubsequences: false)
            if skipping {
                pieces.removeLast()  // more of the over-long run
                if pieces.isEmpty { continue }
                skipping = false
            }
            carry = position > 0 ? Array(pieces.removeFirst()) : []
            if carry.count > longest { (carry, skipping) = ([], true) }
            for piece in pieces.reversed() where found.count < count {
                if let text = render(Self.text(piece)) { found.append(text) }
            }
        }
        try handle.seek(toOffset: end)
        return found.reversed()
    }

    /// What `read` gets of a rotated file, or nothing when it cannot be read (deleted by
    /// retention since it was listed, a damaged `.gz`): said on standard error, with why, and
    /// the other files still shown.
    static func readable<Shown>(_ file: String, _ read: () throws -> [Shown]) -> [Shown] {
        do { return try read() } catch {
            cannotRead(file, error)
            return []
        }
    }

    /// Says on standard error that `file` could not be read (deleted by retention since it was
    /// listed, a damaged `.gz`), and why.
    static func cannotRead(_ file: String, _ error: any Error) {
        let reason = (error as? FileContents.Unreadable)?.reason ?? "\(error)"
        FileHandle.standardError.write(Data("risc tail: cannot read \(file): \(reason); its lines not read by then are not shown\n".utf8))
    }

    /// `lastLines` of a rotated file: read back from its end, or, compressed, read through
    /// (keeping its last `count`).
    static func lastLines<Shown>(_ count: Int, ofFile file: String, render: (Substring) -> Shown?) throws -> [Shown] {
        guard file.hasSuffix(".gz") else {
            guard let handle = FileHandle(forReadingAtPath: file) else { throw FileContents.Unreadable(path: file, reason: String(cString: strerror(errno))) }
            defer { try? handle.close() }
            return try lastLines(count, of: handle, render: render)
        }
        return try lastLines(count, readingThrough: SourceLines(earlier: [file], own: nil, withRest: true), render: render)
    }

    /// The last `count` lines `render` shows of all `lines` gives: what cannot be read back from its
    /// end (a pipe, a `.gz` file) is read through, keeping them.
    static func lastLines<Shown>(_ count: Int, readingThrough lines: SourceLines, render: (Substring) -> Shown?) throws -> [Shown] {
        var found: [Shown] = []
        while let line = try lines.next() {
            if let shown = render(Self.text(line)) { Self.keep(shown, last: count, in: &found) }
        }
        return Array(found.suffix(count))
    }

    /// Appends `item`, keeping at least the last `count` (at most twice as many: trimmed now and then).
    static func keep<Item>(_ item: Item, last count: Int, in items: inout [Item]) {
        items.append(item)
        if items.count >= 2 * count { items.removeFirst(items.count - count) }
    }

    /// A line's bytes as the text `render` takes.
    static func text(_ bytes: some Collection<UInt8>) -> Substring { Substring(String(decoding: bytes, as: UTF8.self)) }

    /// Whether `handle` is a regular file (one that can be read back from its end).
    static func isRegular(_ handle: FileHandle) -> Bool {
        var info = stat()
        return fstat(handle.fileDescriptor, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    static func inode(_ path: String) -> UInt64 {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : 0
    }
}
