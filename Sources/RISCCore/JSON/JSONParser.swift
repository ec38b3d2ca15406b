/// A strict JSON parser (RFC 8259) over bytes.
///
/// Stricter than Foundation where JOSE needs it: duplicate member names are an error
/// (RFC 7515 §4, RFC 7519 §4: "MUST either reject … or use … the last"; risc rejects),
/// input must be UTF-8 with no unpaired surrogate escapes, nesting is limited, and nothing
/// but whitespace may follow the value. It also avoids Foundation on the verification hot path.
public struct JSONParser {
    /// Why a document was refused; `offset` is a byte offset into the input.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public let offset: Int
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// Deepest nesting accepted; tokens and key sets are shallow.
    public static let maxDepth = 32

    public static func parse(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONValue {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { buffer throws(Failure) -> JSONValue in
            var parser = Cursor(bytes: buffer)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.failure("trailing characters after JSON value") }
            return value
        }
    }

    public static func parse(_ string: String) throws(Failure) -> JSONValue {
        try parse(Array(string.utf8))
    }

    /// Parses and requires a top-level object.
    public static func parseObject(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONObject {
        guard case .object(let object) = try parse(bytes) else {
            throw Failure(reason: "expected a JSON object", offset: 0)
        }
        return object
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        func failure(_ reason: String) -> Failure { Failure(reason: reason, offset: index) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(Failure) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw failure("truncated literal") }
            let start = literal.utf8Start
            for offset in 0..<count where bytes[index + offset] != start[offset] {
                throw failure("invalid literal")
            }
            index += count
            return value
        }

        mutating func parseValue(depth: Int) throws(Failure) -> JSONValue {
            guard index < bytes.count else { throw failure("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return .object(try parseObject(depth: depth + 1))
            case UInt8(ascii: "["): return .array(try parseArray(depth: depth + 1))
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            default: throw failure("unexpected character")
            }
        }

        mutating func parseObject(depth: Int) throws(Failure) -> JSONObject {
            guard depth <= JSONParser.maxDepth else { throw failure("nesting too deep") }
            index += 1
            var object = JSONObject(reservingCapacity: 6)
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return object
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected member name") }
                let nameOffset = index
                let name = try parseString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                guard object.insertNew(name, value) else {
                    throw Failure(reason: "duplicate member name", offset: nameOffset)
                }
                skipWhitespace()
                guard index < bytes.count else { throw failure("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return object }
                throw failure("expected ',' or '}'")
            }
        }

        mutating func parseArray(depth: Int) throws(Failure) -> [JSONValue] {
            guard depth <= JSONParser.maxDepth else { throw failure("nesting too deep") }
            index += 1
            var array: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return array
            }
            while true {
                skipWhitespace()
                array.append(try parseValue(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw failure("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return array }
                throw failure("expected ',' or ']'")
            }
        }

        mutating func parseString() throws(Failure) -> String {
            index += 1  // opening quote
            let start = index
            var ascii = true
            // Fast path: no escapes; plain ASCII needs no UTF-8 validation.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    if ascii { return String(decoding: slice, as: UTF8.self) }
                    guard let string = String(validating: slice, as: UTF8.self) else {
                        throw Failure(reason: "invalid UTF-8 in string", offset: start)
                    }
                    return string
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw failure("control character in string") }
                if byte >= 0x80 { ascii = false }
                index += 1
            }
            var utf8 = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let string = String(validating: utf8, as: UTF8.self) else {
                        throw Failure(reason: "invalid UTF-8 in string", offset: start)
                    }
                    return string
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw failure("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): utf8.append(0x22)
                    case UInt8(ascii: "\\"): utf8.append(0x5C)
                    case UInt8(ascii: "/"): utf8.append(0x2F)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try parseHex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw failure("unpaired surrogate escape") }
                            index += 2
                            let low = try parseHex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired surrogate escape") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw failure("unpaired surrogate escape")
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw failure("invalid escape") }
                        utf8.append(contentsOf: String(Character(unicode)).utf8)
                    default: throw failure("invalid escape")
                    }
                default:
                    if byte < 0x20 { throw failure("control character in string") }
                    utf8.append(byte)
                    index += 1
                }
            }
            throw failure("unterminated string")
        }

        mutating func parseHex4() throws(Failure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw failure("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("invalid \\u escape")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func parseNumber() throws(Failure) -> Double {
            let start = index
            var negative = false
            if bytes[index] == UInt8(ascii: "-") { negative = true; index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            var integer: UInt64 = 0
            var digits = 0
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
                if index < bytes.count, isDigit(bytes[index]) { throw failure("leading zero in number") }
                digits = 1
            } else {
                while index < bytes.count, isDigit(bytes[index]) {
                    if digits < 18 { integer = integer * 10 + UInt64(bytes[index] - UInt8(ascii: "0")) }
                    digits += 1
                    index += 1
                }
            }
            var simple = digits <= 15
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                simple = false
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid fraction") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                simple = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid exponent") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if simple { return negative ? -Double(integer) : Double(integer) }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else { throw Failure(reason: "number out of range", offset: start) }
            return value
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    }
}
