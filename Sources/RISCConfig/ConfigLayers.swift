import Foundation
public import RISCCore

/// Settings read from, highest precedence first: flags, `RISC_*` environment variables, a config
/// file (TOML or JSON, `ConfigFile`), defaults.
///
/// Strict on purpose: an unknown key in the file or an unknown `RISC_*` variable is an error (a
/// typo must not silently fall back to a default), and a value of the wrong type names its source.
/// (Departs from the style guide's swift-configuration, whose getters return the default when a
/// value does not convert.)
public struct ConfigLayers {
    /// Flattened dotted keys (`listen.port`) to values, per layer.
    private var flags: [String: JSONValue] = [:]
    private var environment: [String: (name: String, value: String)] = [:]
    private var file: [String: JSONValue] = [:]
    private var filePath: String?
    public private(set) var problems: [String] = []

    public init(filePath: String?, environment env: [String: String], flags: [String: JSONValue], knownKeys: Set<String>) {
        self.flags = flags
        self.filePath = filePath
        if let filePath {
            do {
                let bytes = try FileContents.read(filePath, regularFile: true)
                do {
                    Self.flatten(try ConfigFile.parse(path: filePath, bytes: bytes), prefix: "", into: &file)
                } catch {
                    problems.append("\(filePath): \(error)")
                }
            } catch {
                problems.append("\(filePath): cannot read the config file: \(error.reason)")
            }
        }
        for key in file.keys.sorted() where !knownKeys.contains(key) {
            let members = knownKeys.filter { $0.hasPrefix(key + ".") }.sorted()
            if members.isEmpty {
                problems.append("\(filePath ?? "config"): unknown setting '\(key)'\(Self.suggestion(for: key, among: knownKeys))")
            } else {
                // `listen = 8443`: a value where a table of settings belongs.
                let shown = members.prefix(4).joined(separator: ", ") + (members.count > 4 ? ", …" : "")
                problems.append("\(filePath ?? "config"): '\(key)' is a table of settings (\(shown)), not a value; write them under [\(key)]")
            }
        }
        var byVariable: [String: String] = [:]
        for key in knownKeys { byVariable[Self.variable(for: key)] = key }
        for (name, value) in env where name.hasPrefix("RISC_") {
            if let key = byVariable[name] {
                environment[key] = (name, value)
            } else {
                let meant = Self.suggestion(for: name, among: Set(byVariable.keys), separator: "_", dropping: "RISC_")
                problems.append("environment: unknown variable \(name)\(meant)")
            }
        }
    }

    /// " (did you mean A or B?)" for an unknown `key`: the known keys it is written like (case,
    /// `-` for `_`), those within two edits of it, else those whose last part it is (`port` at the
    /// top of a file, for `listen.port`); "" when none is near. Found: each was "unknown setting
    /// 'port'" and nothing more.
    public static func suggestion(for key: String, among known: Set<String>, separator: Character = ".", dropping prefix: String = "") -> String {
        func normal(_ text: String) -> String { text.lowercased().replacingOccurrences(of: "-", with: "_") }
        let given = normal(String(key.dropFirst(key.hasPrefix(prefix) ? prefix.count : 0)))
        let candidates = known.map { (key: $0, name: normal(String($0.dropFirst($0.hasPrefix(prefix) ? prefix.count : 0)))) }
        var meant = candidates.filter { $0.name == given || $0.name.replacingOccurrences(of: "_", with: "") == given.replacingOccurrences(of: "_", with: "") }
        if meant.isEmpty { meant = candidates.filter { editDistance($0.name, given, atMost: 2) <= 2 } }
        if meant.isEmpty, !given.contains(separator) {
            meant = candidates.filter { $0.name.split(separator: separator).last.map(String.init) == given }
        }
        // The nearest first: the fewest parts (`listen.port` before `admin.api.port`), then by name.
        let names = meant.map(\.key).sorted { ($0.split(separator: separator).count, $0) < ($1.split(separator: separator).count, $1) }.prefix(3)
        guard let last = names.last else { return "" }
        return " (did you mean \(names.count == 1 ? last : names.dropLast().joined(separator: ", ") + " or " + last)?)"
    }

    /// Levenshtein distance between `a` and `b`, or `limit + 1` once it is sure to be larger.
    static func editDistance(_ a: String, _ b: String, atMost limit: Int) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var row = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            if row.min()! > limit { return limit + 1 }
            previous = row
        }
        return previous[b.count]
    }

    /// `listen.port` → `RISC_LISTEN_PORT`.
    static func variable(for key: String) -> String {
        "RISC_" + key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// Settings whose value is itself an object (not flattened further).
    static let objectKeys: Set<String> = ["actions.table", "transmitters"]

    static func flatten(_ object: JSONObject, prefix: String, into result: inout [String: JSONValue]) {
        for (name, value) in object {
            let key = prefix.isEmpty ? name : "\(prefix).\(name)"
            if case .object(let nested) = value, !objectKeys.contains(key) {
                flatten(nested, prefix: key, into: &result)
            } else {
                result[key] = value
            }
        }
    }

    mutating func object(_ key: String) -> JSONObject? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, let source):
            guard let object = try? JSONParser.parseObject(Array(text.utf8)) else {
                problems.append("\(source): expected a JSON object")
                return nil
            }
            return object
        case .json(.object(let object), _): return object
        case .json(let other, let source):
            problems.append("\(source): expected an object, got \(other.serialized)")
            return nil
        }
    }

    mutating func report(_ problem: String) { problems.append(problem) }

    private enum Raw {
        case json(JSONValue, source: String)
        case text(String, source: String)
    }

    /// Where `key`'s value comes from (`--data-dir`-style flag, variable, file), nil for the default.
    public func source(_ key: String) -> String? {
        switch raw(key) {
        case nil: return nil
        case .json(_, let source), .text(_, let source): return source
        }
    }

    /// Where `key`'s value comes from, for people: `flag`, `environment RISC_…`, `file PATH`; nil
    /// for the default.
    public func origin(_ key: String) -> String? {
        if flags[key] != nil { return "flag" }
        if let (name, _) = environment[key] { return "environment \(name)" }
        if let value = file[key], value != .null { return "file \(filePath ?? "config")" }
        return nil
    }

    private func raw(_ key: String) -> Raw? {
        if let value = flags[key] { return .json(value, source: "flag for \(key)") }
        if let (name, value) = environment[key] { return .text(value, source: name) }
        if let value = file[key], value != .null { return .json(value, source: "\(filePath ?? "config"): \(key)") }
        return nil
    }

    public mutating func string(_ key: String) -> String? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, _): return text
        case .json(.string(let text), let source): return withoutNUL(text, source)
        case .json(let other, let source):
            problems.append("\(source): expected a string, got \(other.serialized)")
            return nil
        }
    }

    mutating func strings(_ key: String) -> [String]? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, _):
            return Self.commaList(text)
        case .json(.string(let text), let source):
            // `--set key=a,b` is a list as RISC_KEY=a,b is; a file's string is one item.
            return source.hasPrefix("flag") ? Self.commaList(text) : [text]
        case .json(.array(let items), let source):
            let texts = items.compactMap(\.stringValue)
            if texts.count != items.count { problems.append("\(source): expected an array of strings") }
            return texts.compactMap { withoutNUL($0, source) }
        case .json(let other, let source):
            problems.append("\(source): expected an array of strings, got \(other.serialized)")
            return nil
        }
    }

    /// `text`, unless it holds a NUL (a JSON file's `\u0000`): no path, URL or name can, and every
    /// file call would stop there, so `"/srv/a\u0000b"` would have been /srv/a. (A flag or a
    /// variable cannot hold one; the TOML reader refuses the escape.)
    private mutating func withoutNUL(_ text: String, _ source: String) -> String? {
        guard text.utf8.contains(0) else { return text }
        problems.append("\(source): holds a NUL character (U+0000), which no setting can")
        return nil
    }

    /// `a, b,,c` → `[a, b, c]`: a list given on the command line or in the environment.
    public static func commaList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    mutating func double(_ key: String) -> Double? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, let source):
            guard let value = Double(text), value.isFinite else {
                problems.append("\(source): expected a number, got '\(text)'")
                return nil
            }
            return value
        case .json(.number(let value), _): return value
        case .json(let other, let source):
            problems.append("\(source): expected a number, got \(other.serialized)")
            return nil
        }
    }

    /// Seconds: a number, or a string with a unit (`30d`, `12h`, `90m`, `3600s`).
    mutating func duration(_ key: String) -> Double? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, let source), .json(.string(let text), let source):
            if let problem = durationProblem(text) {
                problems.append("\(source): \(problem)")
                return nil
            }
            return unboundedDurationSeconds(text)
        case .json(.number(let value), let source):
            guard value >= 0, !value.isNaN else {
                problems.append("\(source): expected a duration, got \(value)")
                return nil
            }
            return bounded(value, source: source, as: "\(value)")
        case .json(let other, let source):
            problems.append("\(source): expected a duration such as 30d, got \(other.serialized)")
            return nil
        }
    }

    private mutating func bounded(_ seconds: Double, source: String, as written: String) -> Double? {
        guard seconds > longestDuration else { return seconds }
        problems.append("\(source): a duration is at most 36500d (100 years), got \(written)")
        return nil
    }

    mutating func int(_ key: String) -> Int? {
        guard let value = double(key) else { return nil }
        guard value.rounded() == value, abs(value) < 1e15 else {
            problems.append("\(key): expected a whole number, got \(value)")
            return nil
        }
        return Int(value)
    }

    mutating func bool(_ key: String) -> Bool? {
        switch raw(key) {
        case nil: return nil
        case .text(let text, let source):
            switch text.lowercased() {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off": return false
            default:
                problems.append("\(source): expected true or false, got '\(text)'")
                return nil
            }
        case .json(.bool(let value), _): return value
        case .json(let other, let source):
            problems.append("\(source): expected true or false, got \(other.serialized)")
            return nil
        }
    }
}

/// The longest duration a setting or option takes: 100 years (`36500d`). Anything longer is a slip
/// (a unit, a stray digit), and past it a moment no longer fits the arithmetic of times.
public let longestDuration: Double = 36_500 * 86_400

/// A duration written as a number with `s`, `m`, `h` or `d` (or bare seconds): 30d, 90m, 2.5s;
/// nil for anything else, and for one that is not finite or longer than `longestDuration`.
public func durationSeconds(_ text: String) -> Double? {
    unboundedDurationSeconds(text).flatMap { $0 <= longestDuration ? $0 : nil }
}

/// What is wrong with `text` as a duration (nil: nothing), as the configuration says it: no duration
/// at all, or one past `longestDuration`.
public func durationProblem(_ text: String) -> String? {
    guard let seconds = unboundedDurationSeconds(text) else { return "expected a duration such as 30d, 12h, 90m or 3600 (seconds), got '\(text)'" }
    return seconds > longestDuration ? "a duration is at most 36500d (100 years), got '\(text)'" : nil
}

/// `durationSeconds` without its bound: whether `text` is written as a duration at all.
public func unboundedDurationSeconds(_ text: String) -> Double? {
    guard let unit = text.last, let value = Double(text.dropLast()), value >= 0 else { return Double(text).flatMap { $0 >= 0 ? $0 : nil } }
    switch unit {
    case "s": return value
    case "m": return value * 60
    case "h": return value * 3_600
    case "d": return value * 86_400
    default: return nil
    }
}
