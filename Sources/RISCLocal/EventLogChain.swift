import Foundation
public import RISCCore

/// The event log's hash chain (issue 28). Every line ends with its `seq` (one more than the line
/// before it, across files, restarts and rotation) and `prev`, the RFC 9162 leaf hash
/// (`SHA-256(0x00 ‖ line)`, base64) of the previous line's exact bytes without its newline. The
/// first line of a log is its genesis (`"step":"log","outcome":"genesis"`, naming the log),
/// whose `prev` is 32 zero bytes. Editing, dropping or reordering a line breaks the chain at the
/// next line; what the chain alone cannot show (the last lines cut off) is for checkpoints.
public struct EventLogChain: Sendable, Equatable {
    /// The `seq` of the next line.
    public var next: UInt64
    /// The leaf hash of the line before the next one.
    public var last: [UInt8]

    public static let origin = [UInt8](repeating: 0, count: 32)

    /// A chain with no line yet: its first line is the genesis.
    public static let empty = EventLogChain(next: 0, last: origin)

    public init(next: UInt64, last: [UInt8]) {
        self.next = next
        self.last = last
    }

    /// RFC 9162 §2.1.1's leaf hash of one line's bytes (without its newline).
    public static func leafHash(_ line: some Collection<UInt8>) -> [UInt8] {
        var input: [UInt8] = [0x00]
        input.append(contentsOf: line)
        return SHA256.hash(input)
    }

    /// Seals a serialized record (`{…}` and its newline, as `EventLogRecord.write` gives it, at
    /// the end of `output` from `start`): its `seq` and `prev` go in before the closing brace, and
    /// the chain moves on to it.
    public mutating func seal(_ output: inout [UInt8], from start: Int) {
        precondition(output.count >= start + 3 && output[output.count - 1] == 0x0A && output[output.count - 2] == UInt8(ascii: "}"))
        output.removeLast(2)
        if output.count > start + 1 { output.append(UInt8(ascii: ",")) }
        output.append(contentsOf: #""seq":"#.utf8)
        Self.appendDecimal(next, to: &output)
        output.append(contentsOf: #","prev":""#.utf8)
        Self.appendBase64(last, to: &output)
        output.append(contentsOf: #""}"#.utf8)
        output.withUnsafeBytes { bytes in
            last.withUnsafeMutableBytes { SHA256.hash(prefix: 0x00, UnsafeRawBufferPointer(rebasing: bytes[start...]), into: $0) }
        }
        output.append(0x0A)
        next += 1
    }

    private static func appendDecimal(_ value: UInt64, to output: inout [UInt8]) {
        guard value >= 10 else { return output.append(UInt8(ascii: "0") + UInt8(value)) }
        appendDecimal(value / 10, to: &output)
        output.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 with padding (RFC 4648 §4), as bytes.
    static func appendBase64(_ input: [UInt8], to output: inout [UInt8]) {
        var index = 0
        while index + 3 <= input.count {
            let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(alphabet[Int((value >> 18) & 0x3F)])
            output.append(alphabet[Int((value >> 12) & 0x3F)])
            output.append(alphabet[Int((value >> 6) & 0x3F)])
            output.append(alphabet[Int(value & 0x3F)])
            index += 3
        }
        let rest = input.count - index
        guard rest > 0 else { return }
        let value = UInt32(input[index]) << 16 | (rest == 2 ? UInt32(input[index + 1]) << 8 : 0)
        output.append(alphabet[Int((value >> 18) & 0x3F)])
        output.append(alphabet[Int((value >> 12) & 0x3F)])
        output.append(rest == 2 ? alphabet[Int((value >> 6) & 0x3F)] : UInt8(ascii: "="))
        output.append(UInt8(ascii: "="))
    }

    /// What the end of an existing log file says: where its chain stands after its last whole
    /// line, and how many bytes of a torn last line (a write cut off by a crash) follow it.
    public struct Tail: Sendable, Equatable {
        /// Nil when the file holds no chained line.
        public var chain: EventLogChain?
        public var tornBytes: Int
        /// The last line is whole but its newline was not written.
        public var needsNewline = false
        /// Read from a rotated file, not the one risc goes on writing.
        public var inOtherFile = false
    }

    /// Reads the end of the log at `path` (nil when there is no such file).
    public static func tail(of path: String) throws -> Tail? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        guard size > 0 else { return Tail(chain: nil, tornBytes: 0) }
        // Read back from the end until two newlines (the last whole line) or the file's start.
        var window: [UInt8] = []
        var offset = size
        var chunk: UInt64 = 64 * 1024
        while offset > 0 {
            let from = offset > chunk ? offset - chunk : 0
            try handle.seek(toOffset: from)
            window = [UInt8](try handle.read(upToCount: Int(offset - from)) ?? Data()) + window
            offset = from
            if window.dropLast().filter({ $0 == 0x0A }).count >= 2 { break }
            chunk *= 2
        }
        return tail(ofWindow: window)
    }

    /// `tail(of:)` over the last bytes of a file (at least its last whole line and the newline before it).
    static func tail(ofWindow window: [UInt8]) -> Tail {
        var end = window.count
        var torn = 0
        if window.last != 0x0A {
            let lastNewline = window.lastIndex(of: 0x0A)
            torn = window.count - (lastNewline.map { $0 + 1 } ?? 0)
            end = lastNewline.map { $0 + 1 } ?? 0
        }
        guard end > 0 else { return Tail(chain: nil, tornBytes: torn) }
        let lineEnd = end - 1
        let lineStart = window[..<lineEnd].lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        // A last line whole but for its newline is whole.
        if torn > 0, let whole = chain(after: window[(window.count - torn)...]) { return Tail(chain: whole, tornBytes: 0, needsNewline: true) }
        return Tail(chain: chain(after: window[lineStart..<lineEnd]), tornBytes: torn)
    }

    /// The chain after `line`, when it is a chained line.
    static func chain(after line: ArraySlice<UInt8>) -> EventLogChain? {
        guard let object = try? JSONParser.parseObject(line), let seq = object["seq"].flatMap(sequenceNumber) else { return nil }
        return EventLogChain(next: seq + 1, last: leafHash(line))
    }

    /// A line's `seq` when it is one: a whole number from 0 to 2^53 (JSON's exact integers), so
    /// that an edited line can never make risc trap converting it.
    public static func sequenceNumber(_ value: JSONValue) -> UInt64? {
        guard let number = value.numberValue, number >= 0, number <= 9_007_199_254_740_992, number == number.rounded() else { return nil }
        return UInt64(number)
    }
}
