/// A value bound to a statement or read from a row, as both drivers keep them (a boolean reads
/// as 0 or 1).
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)

    public static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
    public static func optional(_ number: Double?) -> SQLValue { number.map { .double($0) } ?? .null }

    public var int: Int64 {
        switch self {
        case .int(let value): value
        case .double(let value): Int64(exactly: value.rounded(.towardZero)) ?? 0
        case .null, .text: 0
        }
    }
    /// Nil for NULL.
    public var double: Double? {
        switch self {
        case .double(let value): value
        case .int(let value): Double(value)
        case .null, .text: nil
        }
    }
    /// Nil for NULL.
    public var text: String? { if case .text(let value) = self { value } else { nil } }
}

/// A driver's connection as the cold paths use it (what operators and commands run, not what a SET
/// takes): statements in the SQL both PostgreSQL and SQLite speak, so each is written once
/// (`SQLQueueAdmin`, `SQLVerifications`), in the spirit of sql-kit's `SQLDialect`. Parameters are
/// written `$1`, `$2`… (the SQLite session reads them as `?1`, `?2`…), casts `CAST(… AS …)`, and
/// rows changed are counted from `RETURNING`. What differs between the two is a member here.
public protocol SQLSession: Sendable {
    /// The rows `sql` returns.
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]]
    /// Runs `statements` in one write transaction; the rows each returned.
    func transaction(_ statements: [(sql: String, binds: [SQLValue])]) async throws -> [[[SQLValue]]]
    /// The assignments that put a SET back to be tried now (the dialect's clock; a lease cleared).
    var requeueAssignments: String { get }
    /// The store's own consistency check ("ok" when sound); nil where the server keeps its own.
    func integrityCheck() async throws -> String?
}

/// `ids` a chunk at a time (well under either driver's limit on parameters): each chunk's
/// `$1, $2, …` list for an `IN (…)` and its binds.
public func chunks(_ ids: [Int64], of size: Int = 1_000) -> [(list: String, binds: [SQLValue])] {
    stride(from: 0, to: ids.count, by: size).map { start in
        let chunk = ids[start..<min(start + size, ids.count)]
        return ((1...chunk.count).map { "$\($0)" }.joined(separator: ", "), chunk.map { .int($0) })
    }
}
