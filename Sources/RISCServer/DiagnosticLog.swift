import Foundation
public import Logging
import RISCCore
import Synchronization

/// How diagnostics (not the event log) are written to standard error: `text`, one readable line
/// per message, or `json`, one JSON object per line for a log shipper (`ts`, `level`, `label`,
/// `message`, then the metadata as strings). Both carry microsecond UTC timestamps.
public enum DiagnosticLogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// The diagnostic log's level, shared by every copy of a logger made with it, so SIGHUP can
/// change it (`log.level`) for all of them at once.
public final class LogLevelSetting: Sendable {
    private let index: Atomic<Int>
    public init(_ level: Logger.Level) { index = Atomic(Self.index(level)) }
    public var level: Logger.Level {
        get { Logger.Level.allCases[index.load(ordering: .relaxed)] }
        set { index.store(Self.index(newValue), ordering: .relaxed) }
    }
    private static func index(_ level: Logger.Level) -> Int { Logger.Level.allCases.firstIndex(of: level) ?? 0 }
}

/// A `LogHandler` writing whole lines to standard error, one
/// `write` per line under a lock, so lines of concurrent tasks never interleave.
public struct DiagnosticLogHandler: LogHandler {
    /// The shared level; setting it on one handler's copy gives that copy a level of its own.
    var level: LogLevelSetting
    public var logLevel: Logger.Level {
        get { level.level }
        set { level = LogLevelSetting(newValue) }
    }
    public var metadata: Logger.Metadata = [:]
    let label: String
    let format: DiagnosticLogFormat
    let output: Output

    /// Where lines go.
    final class Output: Sendable {
        let descriptor: Int32
        private let lock = Mutex(())
        init(descriptor: Int32) { self.descriptor = descriptor }
        func write(_ line: String) {
            lock.withLock { _ in
                var bytes = Array(line.utf8)
                bytes.append(UInt8(ascii: "\n"))
                writeAll(descriptor, bytes)
            }
        }
    }

    static let standardError = Output(descriptor: STDERR_FILENO)

    public init(label: String, level: Logger.Level, format: DiagnosticLogFormat) {
        self.init(label: label, level: LogLevelSetting(level), format: format)
    }

    public init(label: String, level: LogLevelSetting, format: DiagnosticLogFormat) {
        self.label = label
        self.level = level
        self.format = format
        self.output = Self.standardError
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        output.write(Self.line(event, label: label, format: format, metadata: metadata, now: systemNow()))
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        if case .stringConvertible(let convertible) = value {
            switch convertible {
            case let value as Bool: return .bool(value)
            case let value as Int: return .number(Double(value))
            case let value as Int32: return .number(Double(value))
            case let value as Int64: return .number(Double(value))
            case let value as Double where value.isFinite: return .number(value)
            default: break
            }
        }
        return .string("\(value)")
    }

    /// One line: control characters in the message and the values are escaped (they may quote
    /// what a client sent).
    static func line(_ event: LogEvent, label: String, format: DiagnosticLogFormat, metadata base: Logger.Metadata, now: Double) -> String {
        var merged = base
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        if let error = event.error { merged["error"] = "\(error)" }
        let sorted = merged.sorted { $0.key < $1.key }
        let pairs = sorted.map { ($0.key, "\($0.value)") }
        switch format {
        case .json:
            var object = JSONObject()
            object["ts"] = .string(Timestamp.iso8601(now))
            object["level"] = .string(event.level.rawValue)
            object["label"] = .string(label)
            object["message"] = .string(event.message.description)
            // Numbers and booleans given as such (`.stringConvertible(42)`) stay numbers and booleans.
            for (key, value) in sorted where object[key] == nil { object[key] = Self.json(value) }
            return JSONValue.object(object).serialized
        case .text:
            let fields = pairs.map { "\($0.0)=\(Printable.safe($0.1, maxBytes: 2_048))" }.joined(separator: " ")
            return "\(Timestamp.iso8601(now)) \(event.level.rawValue) \(label): \(Printable.safe(event.message.description, maxBytes: 4_096))"
                + (fields.isEmpty ? "" : " " + fields)
        }
    }
}
