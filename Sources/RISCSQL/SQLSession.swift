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
    /// Runs `steps` in order in one write transaction, each making its statements from the rows
    /// of the steps before it (a step's rows: its statements', one after the other); the rows of
    /// each step.
    func transaction(steps: [SQLStep]) async throws -> [[[SQLValue]]]
    /// The assignments that put a SET back to be tried now (the dialect's clock; a lease cleared).
    var requeueAssignments: String { get }
    /// What a `SELECT` in a write transaction ends with to lock the rows it read ("" where the
    /// transaction holds the whole store).
    var lockRows: String { get }
    /// The statement that wakes every receiver's workers at COMMIT, where other receivers share the store.
    var wakeWorkers: String? { get }
    /// The store's own consistency check ("ok" when sound); nil where the server keeps its own.
    func integrityCheck() async throws -> String?
}

/// One statement and its binds.
public typealias SQLStatement = (sql: String, binds: [SQLValue])
/// A step of a transaction: its statements, made from the rows of the steps before it.
public typealias SQLStep = @Sendable (_ before: [[[SQLValue]]]) throws -> [SQLStatement]

extension SQLSession {
    /// Runs `statements` in one write transaction; the rows each returned.
    public func transaction(_ statements: [SQLStatement]) async throws -> [[[SQLValue]]] {
        try await transaction(steps: statements.map { statement in { _ in [statement] } })
    }
}

/// `values` a chunk at a time (well under either driver's limit on parameters): each chunk's
/// `$first, $first+1, …` list for an `IN (…)` and its binds.
public func chunks(_ values: [SQLValue], from first: Int = 1, of size: Int = 1_000) -> [(list: String, binds: [SQLValue])] {
    stride(from: 0, to: values.count, by: size).map { start in
        let chunk = values[start..<min(start + size, values.count)]
        return ((first..<first + chunk.count).map { "$\($0)" }.joined(separator: ", "), Array(chunk))
    }
}

/// `ids` a chunk at a time, as `chunks(_:)`.
public func chunks(_ ids: [Int64]) -> [(list: String, binds: [SQLValue])] { chunks(ids.map { .int($0) }) }
