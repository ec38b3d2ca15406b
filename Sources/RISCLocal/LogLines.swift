public import Foundation
public import RISCCore

/// A log file's lines front to back, a chunk at a time (a `.gz` file through `gzip -dc`): a log of
/// gigabytes is read with the memory of one chunk and its longest line, never whole. A run of more
/// than `longest` bytes without a newline (zeros a crash left, a file that is no log) is no line of
/// the log's: it is passed over as it is read, not gathered (as `risc tail -n N` does reading back),
/// or, `cutting`, given as its first `longest` bytes (a verifier must see that it is there).
public final class LogLines {
    public let path: String
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    private let gzip: (process: ChildProcess, output: Pipe, errors: Pipe)?
    private let longest: Int
    private let chunk: Int
    private let limit: UInt64
    // The bytes read and not yet given out: `storage[start..<count]`, grown to hold a line of
    // up to `longest` bytes and a chunk (a raw buffer: read(2) fills it in place).
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    private var start = 0  // where the next line begins
    private var scanned = 0  // no newline from `start` to here
    private var skipping = false  // inside a run longer than `longest`
    private let cutting: Bool
    private var cut: [UInt8] = []  // cutting: the over-long run's first `longest` bytes
    private var ended = false
    private var closed = false
    /// Bytes read from the descriptor so far (for a handle: past its offset at the start).
    public private(set) var consumed: UInt64 = 0

    /// Opens `path` (a `.gz` file through `gzip -dc`). Throws `FileContents.Unreadable`.
    public init(path: String, longest: Int = 1 << 20, chunk: Int = 1 << 18, cutting: Bool = false) throws(FileContents.Unreadable) {
        self.path = path
        self.cutting = cutting
        (self.longest, self.chunk, limit) = (longest, chunk, .max)
        (capacity, storage) = (2 * chunk, .allocate(capacity: 2 * chunk))
        ownsDescriptor = true
        if path.hasSuffix(".gz") {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/gzip")
            process.arguments = ["-dc", path]
            let output = Pipe(), errors = Pipe()
            (process.standardInput, process.standardOutput, process.standardError) = (FileHandle.nullDevice, output, errors)
            do { try process.run() } catch { throw FileContents.Unreadable(path: path, reason: "\(error)") }
            gzip = (process, output, errors)
            descriptor = output.fileHandleForReading.fileDescriptor
        } else {
            gzip = nil
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw FileContents.Unreadable(path: path, reason: String(cString: strerror(errno))) }
        }
    }

    /// Reads `handle` from its offset on, at most `limit` bytes, leaving it where reading stopped
    /// (`--follow` goes on from there); the handle stays the caller's.
    public init(handle: FileHandle, path: String, limit: UInt64 = .max, longest: Int = 1 << 20, chunk: Int = 1 << 18, cutting: Bool = false) {
        self.path = path
        self.cutting = cutting
        (self.longest, self.chunk, self.limit) = (longest, chunk, limit)
        (capacity, storage) = (2 * chunk, .allocate(capacity: 2 * chunk))
        (descriptor, ownsDescriptor, gzip) = (handle.fileDescriptor, false, nil)
    }

    deinit {
        close()
        storage.deallocate()
    }

    /// The next whole line, without its newline; nil at the end of the file, where `rest` holds
    /// what follows the last newline (a line still being written).
    public func next() throws(FileContents.Unreadable) -> ArraySlice<UInt8>? {
        while true {
            if scanned < count, let found = memchr(storage + scanned, 0x0A, count - scanned) {
                let newline = storage.distance(to: found.assumingMemoryBound(to: UInt8.self))
                defer { (start, scanned) = (newline + 1, newline + 1) }
                if skipping {
                    skipping = false
                    guard cutting else { continue }
                    defer { cut = [] }
                    return cut[...]
                }
                return ArraySlice(UnsafeBufferPointer(start: storage + start, count: newline - start))
            }
            scanned = count
            if ended { return nil }
            if start > 0 {
                memmove(storage, storage + start, count - start)
                (count, scanned, start) = (count - start, scanned - start, 0)
            }
            if count > longest {
                if cutting { cut = Array(UnsafeBufferPointer(start: storage, count: longest)) }
                (count, scanned, skipping) = (0, 0, true)
            }
            if capacity - count < chunk {
                let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: max(2 * capacity, count + chunk))
                larger.initialize(from: storage, count: count)
                storage.deallocate()
                (storage, capacity) = (larger, max(2 * capacity, count + chunk))
            }
            try fill()
        }
    }

    /// What follows the last newline, once `next()` has returned nil (inside an over-long run:
    /// nothing, or, `cutting`, its first `longest` bytes).
    public var rest: ArraySlice<UInt8> { skipping ? cut[...] : ArraySlice(UnsafeBufferPointer(start: storage + start, count: count - start)) }

    /// Reads one more chunk after `count`, or marks the end (where a `.gz` file's gzip must have succeeded).
    private func fill() throws(FileContents.Unreadable) {
        let wanted = Int(min(UInt64(chunk), limit - consumed))
        var read = 0
        while wanted > 0 {
            read = Foundation.read(descriptor, storage + count, wanted)
            guard read < 0 && errno == EINTR else { break }
        }
        count += max(read, 0)
        guard read <= 0 else {
            consumed += UInt64(read)
            return
        }
        ended = true
        if read < 0 { throw FileContents.Unreadable(path: path, reason: String(cString: strerror(errno))) }
        guard let gzip else { return }
        gzip.process.waitUntilExit()
        let said = (try? gzip.errors.fileHandleForReading.readToEnd()).flatMap { $0 } ?? Data()
        guard gzip.process.terminationReason == .exit && gzip.process.terminationStatus == 0 else {
            let text = String(decoding: said, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw FileContents.Unreadable(path: path, reason: "gzip -dc failed: \(Printable.safe(text, maxBytes: 200))")
        }
    }

    /// Stops reading: closes what this reader opened (a gzip still running is ended and reaped).
    public func close() {
        guard ownsDescriptor, !closed else { return }
        closed = true
        if gzip == nil { _ = Foundation.close(descriptor) }
        if let gzip {
            try? gzip.output.fileHandleForReading.close()
            try? gzip.errors.fileHandleForReading.close()
            if gzip.process.isRunning { gzip.process.terminate() }
            gzip.process.waitUntilExit()
        }
    }
}
