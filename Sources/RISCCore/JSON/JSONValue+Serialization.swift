extension JSONValue {
    /// Compact JSON text. Whole numbers within ±2^53 print without a fraction.
    public var serialized: String {
        var output = ""
        write(to: &output, indent: nil, level: 0)
        return output
    }

    /// Indented JSON text (two spaces), for people.
    public var prettyPrinted: String {
        var output = ""
        write(to: &output, indent: "  ", level: 0)
        return output
    }

    func write(to output: inout String, indent: String?, level: Int) {
        switch self {
        case .null: output += "null"
        case .bool(let b): output += b ? "true" : "false"
        case .number(let n): output += JSONValue.format(n)
        case .string(let s): JSONValue.writeString(s, to: &output)
        case .array(let items):
            if items.isEmpty { output += "[]"; return }
            output += "["
            for (i, item) in items.enumerated() {
                if i > 0 { output += "," }
                JSONValue.newline(&output, indent, level + 1)
                item.write(to: &output, indent: indent, level: level + 1)
            }
            JSONValue.newline(&output, indent, level)
            output += "]"
        case .object(let object):
            if object.isEmpty { output += "{}"; return }
            output += "{"
            for (i, member) in object.enumerated() {
                if i > 0 { output += "," }
                JSONValue.newline(&output, indent, level + 1)
                JSONValue.writeString(member.key, to: &output)
                output += indent == nil ? ":" : ": "
                member.value.write(to: &output, indent: indent, level: level + 1)
            }
            JSONValue.newline(&output, indent, level)
            output += "}"
        }
    }

    private static func newline(_ output: inout String, _ indent: String?, _ level: Int) {
        guard let indent else { return }
        output += "\n"
        for _ in 0..<level { output += indent }
    }

    static func format(_ number: Double) -> String {
        if number.rounded() == number, abs(number) < 9_007_199_254_740_992 { return String(Int64(number)) }
        return number.description
    }

    static func writeString(_ string: String, to output: inout String) {
        // Fast path: nothing to escape (the usual case for URIs, IDs and codes) → one append.
        let plain = string.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C && $0 != 0x7F && $0 != 0xE2 }
        if plain {
            output += "\""
            output += string
            output += "\""
            return
        }
        output += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
