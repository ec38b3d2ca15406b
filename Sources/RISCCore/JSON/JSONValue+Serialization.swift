extension JSONValue {
    /// Compact JSON text. Whole numbers within ±2^53 print without a fraction.
    public var serialized: String {
        var output: [UInt8] = []
        output.reserveCapacity(128)
        write(to: &output, indent: nil, level: 0)
        return String(decoding: output, as: UTF8.self)
    }

    /// Appends the compact JSON text's UTF-8 to `output` (the event log's path: no `String` built).
    public func serialize(into output: inout [UInt8]) {
        write(to: &output, indent: nil, level: 0)
    }

    /// Indented JSON text (two spaces), for people.
    public var prettyPrinted: String { prettyPrinted(level: 0) }

    /// Indented as a member `level` deep in `prettyPrinted`'s output (an array's elements written
    /// one at a time, `risc accounts list --json`).
    public func prettyPrinted(level: Int) -> String {
        var output: [UInt8] = []
        write(to: &output, indent: 2, level: level)
        return String(decoding: output, as: UTF8.self)
    }

    func write(to output: inout [UInt8], indent: Int?, level: Int) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let b): output.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): output.append(contentsOf: JSONValue.format(n).utf8)
        case .string(let s): JSONValue.writeString(s, to: &output)
        case .array(let items):
            if items.isEmpty { output.append(contentsOf: "[]".utf8); return }
            output.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { output.append(UInt8(ascii: ",")) }
                JSONValue.newline(&output, indent, level + 1)
                item.write(to: &output, indent: indent, level: level + 1)
            }
            JSONValue.newline(&output, indent, level)
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            if object.isEmpty { output.append(contentsOf: "{}".utf8); return }
            output.append(UInt8(ascii: "{"))
            for (i, member) in object.enumerated() {
                if i > 0 { output.append(UInt8(ascii: ",")) }
                JSONValue.newline(&output, indent, level + 1)
                JSONValue.writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                if indent != nil { output.append(UInt8(ascii: " ")) }
                member.value.write(to: &output, indent: indent, level: level + 1)
            }
            JSONValue.newline(&output, indent, level)
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ output: inout [UInt8], _ indent: Int?, _ level: Int) {
        guard let indent else { return }
        output.append(UInt8(ascii: "\n"))
        output.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * level))
    }

    static func format(_ number: Double) -> String {
        // JSON has no NaN or infinity: null, as JSON.stringify writes them, never text that does not parse.
        guard number.isFinite else { return "null" }
        if number.rounded() == number, abs(number) < 9_007_199_254_740_992 { return String(Int64(number)) }
        return number.description
    }

    /// A JSON string: `"`, `\`, control characters (C0, DEL, C1), U+2028/U+2029 (they break
    /// JavaScript readers of the log) and the bidirectional controls (they reorder what a terminal
    /// shows) escaped; everything else copied as UTF-8, in runs.
    static func writeString(_ string: String, to output: inout [UInt8]) {
        var string = string
        string.withUTF8 { utf8 in
            output.append(UInt8(ascii: "\""))
            var run = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                var length = 1
                let escape: String
                switch byte {
                case 0x22: escape = "\\\""
                case 0x5C: escape = "\\\\"
                case 0x0A: escape = "\\n"
                case 0x0D: escape = "\\r"
                case 0x09: escape = "\\t"
                case 0x00..<0x20, 0x7F: escape = hexEscape(UInt32(byte))
                case 0xC2 where index + 1 < utf8.count && (0x80...0x9F).contains(utf8[index + 1]):
                    escape = hexEscape(UInt32(utf8[index + 1]))  // C1 controls (U+0080–U+009F)
                    length = 2
                case 0xD8 where index + 1 < utf8.count && utf8[index + 1] == 0x9C:
                    escape = hexEscape(0x061C)  // Arabic letter mark
                    length = 2
                case 0xE2 where index + 2 < utf8.count && Self.isEscapedE2(utf8[index + 1], utf8[index + 2]):
                    escape = hexEscape(0x2000 | (UInt32(utf8[index + 1] & 0x3F) << 6) | UInt32(utf8[index + 2] & 0x3F))
                    length = 3
                default:
                    index += 1
                    continue
                }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                output.append(contentsOf: escape.utf8)
                index += length
                run = index
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<utf8.count]))
            output.append(UInt8(ascii: "\""))
        }
    }

    /// U+2028/U+2029, U+200E/U+200F, U+202A–U+202E, U+2066–U+2069 after their 0xE2 lead byte.
    private static func isEscapedE2(_ second: UInt8, _ third: UInt8) -> Bool {
        switch (second, third) {
        case (0x80, 0xA8), (0x80, 0xA9), (0x80, 0x8E), (0x80, 0x8F), (0x80, 0xAA...0xAE), (0x81, 0xA6...0xA9): true
        default: false
        }
    }

    private static func hexEscape(_ value: UInt32) -> String {
        let hex = String(value, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    }
}
