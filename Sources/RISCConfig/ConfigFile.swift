import Foundation
package import RISCCore
import TOMLKit

/// The config file `--config` names: TOML (`.toml`, which carries comments) or JSON (`.json`); a
/// file named otherwise is JSON when its first character is `{`, TOML otherwise. Either way it
/// becomes one JSON object, which `ConfigLayers` flattens and checks key by key, so both formats
/// take exactly the same keys and values.
public enum ConfigFile {
    package struct Unreadable: Error, CustomStringConvertible {
        package let description: String
    }

    public enum Format: String, CaseIterable, Sendable {
        case toml, json
    }

    static func format(path: String, bytes: [UInt8]) -> Format {
        let lowered = path.lowercased()
        if lowered.hasSuffix(".toml") { return .toml }
        if lowered.hasSuffix(".json") { return .json }
        let first = bytes.first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
        return first == UInt8(ascii: "{") ? .json : .toml
    }

    package static func parse(path: String, bytes: [UInt8]) throws(Unreadable) -> JSONObject {
        // A UTF-8 byte order mark (editors on Windows write one) is not part of the document.
        let bytes = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        switch format(path: path, bytes: bytes) {
        case .json:
            do { return try JSONParser.parseObject(bytes) } catch { throw Unreadable(description: "not a JSON object (\(error))") }
        case .toml:
            guard let text = String(validating: bytes, as: UTF8.self) else { throw Unreadable(description: "TOML must be UTF-8") }
            if let problem = TOMLPitfalls.first(in: bytes) { throw Unreadable(description: problem) }
            let table: TOMLTable
            do {
                table = try TOMLTable(string: text)
            } catch let error as TOMLParseError {
                throw Unreadable(description: "TOML, line \(error.source.begin.line), column \(error.source.begin.column): \(error.description)")
            } catch {
                throw Unreadable(description: "not TOML (\(error))")
            }
            return try object(table, path: "", depth: 1)
        }
    }

    /// How deep tables and arrays may nest, as in a JSON config (`JSONParser.maxDepth`): no
    /// setting is deeper than four, and a file of thousands of dotted keys is refused with this
    /// error instead of exhausting the stack.
    static let maxDepth = JSONParser.maxDepth

    private static func object(_ table: TOMLTable, path: String, depth: Int) throws(Unreadable) -> JSONObject {
        guard depth <= maxDepth else { throw tooDeep(path) }
        var object = JSONObject()
        for (key, value) in table {
            object[key] = try json(value, path: path.isEmpty ? key : "\(path).\(key)", depth: depth)
        }
        return object
    }

    private static func tooDeep(_ path: String) -> Unreadable {
        Unreadable(description: "tables or arrays nested deeper than \(maxDepth) levels (at \(Printable.safe(String(path.prefix(120)), maxBytes: 120))…)")
    }

    /// TOML's types onto JSON's: integers within ±2^53 and finite floats become numbers; dates
    /// and times have no setting to go to, so they are refused rather than guessed into strings.
    private static func json(_ value: any TOMLValueConvertible, path: String, depth: Int) throws(Unreadable) -> JSONValue {
        switch value.type {
        case .table:
            return .object(try object(value.table ?? TOMLTable(), path: path, depth: depth + 1))
        case .array:
            guard depth < maxDepth else { throw tooDeep(path) }
            var items: [JSONValue] = []
            for (offset, item) in (value.array ?? TOMLArray()).enumerated() {
                items.append(try json(item, path: "\(path)[\(offset)]", depth: depth + 1))
            }
            return .array(items)
        case .string:
            return .string(value.string ?? "")
        case .bool:
            return .bool(value.bool ?? false)
        case .int:
            guard let integer = value.int, integer.magnitude <= 1 << 53 else { throw Unreadable(description: "\(path): integer out of range") }
            return .number(Double(integer))
        case .double:
            guard let number = value.double, number.isFinite else { throw Unreadable(description: "\(path): expected a finite number") }
            return .number(number)
        case .date, .time, .dateTime:
            throw Unreadable(description: "\(path): no setting takes a TOML date or time (quote it if it is text)")
        }
    }
}

/// A TOML document from dotted keys, for `--print-config`: top-level keys first, then one table
/// per prefix (`[listen]`, `[linking.notices]`), an object value as tables of its own, an unset
/// value as a comment, each line's comment after it.
enum TOMLWriter {
    struct Entry {
        let key: String
        /// `.null`: not set.
        let value: JSONValue
        let comment: String?
    }

    static func document(header: [String], entries: [Entry]) -> String {
        var lines = header.map { "# \($0)" }
        var groups: [(prefix: String, entries: [Entry])] = [("", [])]
        for entry in entries {
            let prefix = entry.key.split(separator: ".").dropLast().joined(separator: ".")
            if let at = groups.firstIndex(where: { $0.prefix == prefix }) {
                groups[at].entries.append(entry)
            } else {
                groups.append((prefix, [entry]))
            }
        }
        for group in groups where !group.entries.isEmpty {
            if !group.prefix.isEmpty {
                lines.append("")
                lines.append("[\(path(group.prefix.split(separator: ".").map(String.init)))]")
            }
            var tables: [(path: [String], object: JSONObject, comment: String?)] = []
            for entry in group.entries {
                let name = key(String(entry.key.split(separator: ".").last ?? ""))
                let comment = entry.comment.map { "  # \($0)" } ?? ""
                switch entry.value {
                case .null: lines.append("# \(name) is not set")
                case .object(let object): tables.append((entry.key.split(separator: ".").map(String.init), object, entry.comment))
                default: lines.append("\(name) = \(value(entry.value))\(comment)")
                }
            }
            for table in tables {
                if let comment = table.comment { lines.append(""); lines.append("# \(table.path.joined(separator: ".")): \(comment)") }
                write(table.object, at: table.path, into: &lines)
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func write(_ object: JSONObject, at tablePath: [String], into lines: inout [String]) {
        let scalars = object.filter { $0.value.objectValue == nil }
        if !scalars.isEmpty || object.isEmpty {
            lines.append("[\(path(tablePath))]")
            for member in scalars { lines.append("\(key(member.key)) = \(value(member.value))") }
        }
        for member in object {
            if let nested = member.value.objectValue { write(nested, at: tablePath + [member.key], into: &lines) }
        }
    }

    private static func path(_ segments: [String]) -> String { segments.map(key).joined(separator: ".") }

    static func key(_ name: String) -> String {
        let bare = !name.isEmpty && name.unicodeScalars.allSatisfy { ($0.isASCII && (CharacterSet.alphanumerics.contains($0))) || $0 == "_" || $0 == "-" }
        return bare ? name : string(name)
    }

    static func value(_ value: JSONValue) -> String {
        switch value {
        case .null: return "\"\""
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number):
            if number.rounded() == number, abs(number) <= 9_007_199_254_740_992 { return String(Int64(number)) }
            return "\(number)"
        case .string(let text): return string(text)
        case .array(let items): return "[" + items.map { Self.value($0) }.joined(separator: ", ") + "]"
        case .object(let object): return "{ " + object.map { "\(key($0.key)) = \(Self.value($0.value))" }.joined(separator: ", ") + " }"
        }
    }

    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += String(format: "\\u%04X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
