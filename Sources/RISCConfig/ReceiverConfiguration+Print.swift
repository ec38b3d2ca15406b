import Foundation
import Logging
import RISCClient
public import RISCCore
public import RISCServer
import RISCStorage

extension ReceiverConfiguration {
    /// Every key of `keys` with the value `risc serve` runs with (defaults included; `.null` for a
    /// setting that is not set), as the config file would say it. Secrets never appear: risc reads
    /// them from files, and those are shown by path; a URL's password and query values are
    /// `REDACTED`, and so are fragments and path segments that look like tokens (`Redaction.url`).
    public var effectiveSettings: [(key: String, value: JSONValue)] {
        Self.settings.map { ($0.key, $0.value(self)) }
    }

    /// The whole action table (defaults and overrides), keyed as `actions.table` takes it: short
    /// event names where they name the type, `""` for any other reason.
    static func json(_ table: ActionTable) -> JSONObject { json(rows: table.rows) }

    static func json(rows: [String: [String: [Action]]]) -> JSONObject {
        var object = JSONObject()
        for uri in rows.keys.sorted() {
            let type = EventType(uri)
            let name = EventType(name: type.shortName) == type ? type.shortName : uri
            var reasons = JSONObject()
            for reason in (rows[uri] ?? [:]).keys.sorted() {
                reasons[reason] = .strings(rows[uri]?[reason]?.map(\.rawValue) ?? [])
            }
            object[name] = .object(reasons)
        }
        return object
    }

}

extension JSONValue {
    public static func strings(_ items: [String]) -> JSONValue { .array(items.map { .string($0) }) }
    public static func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }

    /// Seconds as the largest whole unit (`5d`, `12h`, `90m`), else a number of seconds (also when
    /// too long for a setting to take, as code may set it: printed, never a trap).
    static func duration(_ seconds: Double) -> JSONValue {
        for (unit, size) in [("d", 86_400.0), ("h", 3_600), ("m", 60)]
        where seconds > 0 && seconds <= longestDuration && (seconds / size).rounded() == seconds / size {
            return .string("\(Int64(seconds / size))\(unit)")
        }
        return .number(seconds)
    }
}

extension ReceiverConfiguration {
    /// The reference table of `docs/configuration.md` (between its `generated` markers), made from
    /// the key list and a default configuration, so a key's default and meaning are written once,
    /// in code: every key, its default as a config file says it, whether SIGHUP applies it.
    public static var referenceTable: String {
        let defaults = ReceiverConfiguration().effectiveSettings
        var lines = ["| key | default | on SIGHUP | meaning |", "|---|---|---|---|"]
        for ((key, help), (_, value)) in zip(keys, defaults) {
            let shown: String
            switch value {
            case .null: shown = "unset"
            case .array(let items) where items.isEmpty: shown = key == "audiences" ? "(required)" : "none"
            case .object(let members) where members.isEmpty: shown = "none"
            case .object: shown = "the table in [actions.md](actions.md)"
            default: shown = "`" + TOMLWriter.value(value) + "`"
            }
            let reload = reloadableKeys.contains(key) ? "applied" : key == transmittersSetting.key ? "rows applied" : "restart"
            lines.append("| `\(key)` | \(shown) | \(reload) | \(help.replacingOccurrences(of: "|", with: "\\|")) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A setting's help with its default as a config file writes it, from the default
    /// configuration (help texts never name a default of their own): for `serve`'s flags.
    public static func helpWithDefault(_ key: String) -> String {
        let help = keys.first { $0.key == key }?.help ?? ""
        guard let value = ReceiverConfiguration().effectiveSettings.first(where: { $0.key == key })?.value else { return help }
        switch value {
        case .null, .object: return help
        case .array(let items) where items.isEmpty: return help
        default: return help + " (default " + TOMLWriter.value(value) + ")"
        }
    }
}

extension ReceiverConfiguration {
    /// `--print-config`: the effective configuration as a config file (TOML with each value's
    /// source beside it, or JSON), secrets redacted; `version` names the binary in the header.
    public func printed(sources: [String: String], format: ConfigFile.Format, version: String) -> String {
        let settings = effectiveSettings
        switch format {
        case .json:
            var root = JSONObject()
            for (key, value) in settings { Self.insert(value, at: key.split(separator: ".").map(String.init), into: &root) }
            return JSONValue.object(root).prettyPrinted + "\n"
        case .toml:
            let entries = settings.map { setting in
                TOMLWriter.Entry(key: setting.key, value: setting.value, comment: sources[setting.key] ?? "default")
            }
            return TOMLWriter.document(
                header: [
                    "risc serve --print-config: the effective configuration of risc \(version); each value's source follows it.",
                    "Secrets live in the files named here and are never printed; URL passwords and query values read REDACTED.",
                    "A valid --config file as it is (TOML); --print-config-format json prints the same as JSON.",
                ],
                entries: entries)
        }
    }

    private static func insert(_ value: JSONValue, at path: [String], into object: inout JSONObject) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value
        } else {
            var nested = object[first]?.objectValue ?? JSONObject()
            insert(value, at: Array(path.dropFirst()), into: &nested)
            object[first] = .object(nested)
        }
    }
}
