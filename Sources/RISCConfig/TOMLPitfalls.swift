import Foundation

/// What the TOML parser (TOMLKit 0.6.0's toml++) mishandles, found before it sees the text. It
/// fails an assertion, aborting risc, on a control character in a table header, where a header
/// starts with what starts no key (`[` alone on a line, `[#x]`, `[.a]`, `[é]`), where an array
/// expects a value and finds `}` (`a = [}]`, `a = [1, }]`), and in several places of its date and
/// time parsing (`a = 2026-12-06 0`). It takes the text, and hands strings back, as C strings: a
/// NUL ended the document there and dropped what followed, and a `\u0000` escape would cut a value
/// without a word. Found by `scripts/fuzz` (FuzzFiles). No setting takes a date or time: a
/// well-formed one is left to the parser (and then refused naming its key); a bare value that
/// it would read as one (a digit first, then a `:` or a `-` that is no exponent's) but is not one
/// is refused here.
///
/// The scan follows TOML's structure only as far as these need: a `[` first on a line outside any
/// value is a header; comments and strings (multi-line ones too) are skipped; the brackets of
/// values are kept on a stack, since arrays may span lines.
enum TOMLPitfalls {
    /// The first of them, as the parser words its errors ("TOML, line L, column C: …"); nil: none.
    /// A control character TOML allows nowhere (U+0000–U+0008, U+000B, U+000C, U+000E–U+001F,
    /// U+007F: only tab, LF and CR are) comes first, wherever it stands.
    static func first(in bytes: [UInt8]) -> String? {
        if let at = bytes.firstIndex(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D || $0 == 0x7F }) {
            return located(in: bytes, at: at, "a control character (U+\(String(format: "%04X", bytes[at]))) is not allowed in TOML")
        }
        var scan = Scan(bytes: bytes)
        return scan.run()
    }

    /// `text` at `index`, as "TOML, line L, column C: text" (the column in characters).
    static func located(in bytes: [UInt8], at index: Int, _ text: String) -> String {
        let lineStart = bytes[..<index].lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        let line = bytes[..<index].count { $0 == 0x0A } + 1
        return "TOML, line \(line), column \(String(decoding: bytes[lineStart..<index], as: UTF8.self).unicodeScalars.count + 1): \(text)"
    }

    private struct Scan {
        let bytes: [UInt8]
        var at = 0
        var atLineStart = true
        /// The open `[` and `{` of values.
        var open: [UInt8] = []
        /// Just after an array's `[` or a `,` in it: a value (or its `]`) comes next.
        var expectingValue = false

        static let (quote, apostrophe, backslash, hash, newline) = (
            UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "\\"), UInt8(ascii: "#"), UInt8(0x0A)
        )

        func starts(_ text: String, at index: Int) -> Bool { bytes[index...].starts(with: text.utf8) }

        func problem(at index: Int, _ text: String) -> String { TOMLPitfalls.located(in: bytes, at: index, text) }

        /// A basic string's `\u0000` or `\U00000000` at `index`.
        func nulEscape(_ index: Int) -> String? {
            guard starts("\\u0000", at: index) || starts("\\U00000000", at: index) else { return nil }
            return problem(at: index, "a \\u0000 escape (NUL) in a string: no setting can hold one")
        }

        /// What a bare value starts after, and what ends one as the parser reads it (a quote does not:
        /// it read `1'03-12-04 3` on as a date).
        static let valueStartsAfter: Set<UInt8> = Set(" \t\r\n=,[{".utf8)
        static let valueEnds: Set<UInt8> = Set(" \t\r\n,]}#".utf8)

        static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

        /// `text` all digits and `separators` at the offsets given.
        static func shape(_ text: ArraySlice<UInt8>, _ count: Int, _ separators: [Int: UInt8]) -> Bool {
            text.count == count && text.enumerated().allSatisfy { offset, byte in separators[offset].map { $0 == byte } ?? isDigit(byte) }
        }

        /// RFC 3339 as TOML has it: `YYYY-MM-DD`.
        static func isDate(_ text: ArraySlice<UInt8>) -> Bool { shape(text, 10, [4: UInt8(ascii: "-"), 7: UInt8(ascii: "-")]) }

        /// `HH:MM:SS`, then `.` and digits, then `Z` or `±HH:MM`, each optional.
        static func isTime(_ text: ArraySlice<UInt8>) -> Bool {
            guard text.count >= 8, shape(text.prefix(8), 8, [2: UInt8(ascii: ":"), 5: UInt8(ascii: ":")]) else { return false }
            var rest = text.dropFirst(8)
            if rest.first == UInt8(ascii: ".") {
                let digits = rest.dropFirst().prefix(while: isDigit)
                guard !digits.isEmpty else { return false }
                rest = rest.dropFirst(1 + digits.count)
            }
            if rest.first == UInt8(ascii: "Z") || rest.first == UInt8(ascii: "z") { return rest.count == 1 }
            if rest.first == UInt8(ascii: "+") || rest.first == UInt8(ascii: "-") { return shape(rest.dropFirst(), 5, [2: UInt8(ascii: ":")]) }
            return rest.isEmpty
        }

        static func isDateOrTime(_ text: ArraySlice<UInt8>) -> Bool {
            if isDate(text) || isTime(text) { return true }
            guard text.count > 11, [UInt8(ascii: "T"), UInt8(ascii: "t")].contains(text[text.startIndex + 10]) else { return false }
            return isDate(text.prefix(10)) && isTime(text.dropFirst(11))
        }

        static func isKeyStart(_ byte: UInt8) -> Bool {
            isDigit(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [UInt8(ascii: "_"), UInt8(ascii: "-"), quote, apostrophe, UInt8(ascii: "]")].contains(byte)
        }

        mutating func run() -> String? {
            while at < bytes.count {
                let byte = bytes[at]
                if byte == Self.newline {
                    atLineStart = true
                    at += 1
                } else if byte == 0x20 || byte == 0x09 || byte == 0x0D {
                    at += 1
                } else if byte == Self.hash {
                    at = bytes[at...].firstIndex(of: Self.newline) ?? bytes.count
                } else if atLineStart && open.isEmpty && byte == UInt8(ascii: "[") {
                    if let problem = header() { return problem }
                } else {
                    atLineStart = false
                    if expectingValue && byte == UInt8(ascii: "}") { return problem(at: at, "'}' where the array expects a value or its ']'") }
                    expectingValue = false
                    if let problem = valuePart(byte) { return problem }
                }
            }
            return nil
        }

        /// A table header's line: its name must start as a key does.
        mutating func header() -> String? {
            var next = at + 1
            if next < bytes.count && bytes[next] == UInt8(ascii: "[") { next += 1 }
            while next < bytes.count && (bytes[next] == 0x20 || bytes[next] == 0x09) { next += 1 }
            if next < bytes.count && !Self.isKeyStart(bytes[next]) {
                return problem(at: next, "a table header names a table: a letter, digit, '_', '-' or a quoted key comes after its '['")
            }
            // A header holds no value: the rest of its line opens nothing that goes on.
            at = bytes[at...].firstIndex(of: Self.newline) ?? bytes.count
            return nil
        }

        /// A string, a bracket or any other byte of a key or value.
        mutating func valuePart(_ byte: UInt8) -> String? {
            if starts("\"\"\"", at: at) || starts("'''", at: at) {
                // A multi-line string ends at the next unescaped delimiter (a literal one has no escapes);
                // up to two more quotes may close it ("""a""""" is a"").
                let delimiter = String(repeating: Character(UnicodeScalar(byte)), count: 3)
                at += 3
                while at < bytes.count && !starts(delimiter, at: at) {
                    if byte == Self.quote && bytes[at] == Self.backslash, let problem = nulEscape(at) { return problem }
                    at += byte == Self.quote && bytes[at] == Self.backslash ? 2 : 1
                }
                at += 3
                while at < bytes.count && bytes[at] == byte { at += 1 }
            } else if byte == Self.quote || byte == Self.apostrophe {
                at += 1
                while at < bytes.count && bytes[at] != byte && bytes[at] != Self.newline {
                    if byte == Self.quote && bytes[at] == Self.backslash, let problem = nulEscape(at) { return problem }
                    at += byte == Self.quote && bytes[at] == Self.backslash ? 2 : 1
                }
                if at < bytes.count && bytes[at] == byte { at += 1 }
            } else {
                switch byte {
                case UInt8(ascii: "["):
                    open.append(byte)
                    expectingValue = true
                case UInt8(ascii: "{"): open.append(byte)
                case UInt8(ascii: "]"), UInt8(ascii: "}"): _ = open.popLast()
                case UInt8(ascii: ","): expectingValue = open.last == UInt8(ascii: "[")
                case 0x30...0x39 where at == 0 || Self.valueStartsAfter.contains(bytes[at - 1]):
                    var end = bytes[at...].firstIndex { Self.valueEnds.contains($0) } ?? bytes.count
                    let token = Array(bytes[at..<end])
                    // A number holds a '-' only in its exponent ("1e-5"); the parser takes any other
                    // '-' or a ':' for a date or time, whatever the digits around it.
                    let dash = token.indices.contains { token[$0] == UInt8(ascii: "-") && ![UInt8(ascii: "e"), UInt8(ascii: "E")].contains(token[$0 - 1]) }
                    guard dash || token.contains(UInt8(ascii: ":")) else { break }
                    // A date, a space, then a digit: the parser reads on as one date-time.
                    if Self.isDate(token[...]), end + 1 < bytes.count, bytes[end] == 0x20, Self.isDigit(bytes[end + 1]) {
                        let timeEnd = bytes[(end + 1)...].firstIndex { Self.valueEnds.contains($0) } ?? bytes.count
                        guard Self.isTime(bytes[(end + 1)..<timeEnd]) else {
                            return problem(at: at, "not a TOML date and time, and no setting takes one (quote it if it is text)")
                        }
                        end = timeEnd
                    } else if !Self.isDateOrTime(token[...]) {
                        return problem(at: at, "not a TOML date or time, and no setting takes one (quote it if it is text)")
                    }
                    at = end
                    return nil
                default: break
                }
                at += 1
            }
            return nil
        }
    }
}
