/// A JSON value as risc reads it from tokens, key sets and discovery documents.
///
/// Objects keep member order, so what risc signs and prints reads as it was written.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var numberValue: Double? { if case .number(let n) = self { n } else { nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
}

/// A JSON object with unique member names, in document order.
///
/// Members live in an array, searched linearly while the object is small (tokens and key sets
/// have a handful of members); past `indexThreshold` members a dictionary index is kept too, so
/// a hostile object with thousands of members costs linear, not quadratic, time.
public struct JSONObject: Sendable, Equatable, Sequence {
    private var members: [(key: String, value: JSONValue)] = []
    private var index: [String: Int]?
    static let indexThreshold = 12

    public init() {}

    init(reservingCapacity capacity: Int) {
        members.reserveCapacity(capacity)
    }

    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        for (key, value) in pairs { self[key] = value }
    }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    private func position(of key: String) -> Int? {
        if let index { return index[key] }
        return members.firstIndex { $0.key == key }
    }

    public subscript(key: String) -> JSONValue? {
        get { position(of: key).map { members[$0].value } }
        set {
            if let at = position(of: key) {
                if let newValue {
                    members[at].value = newValue
                } else {
                    members.remove(at: at)
                    if index != nil { rebuildIndex() }
                }
            } else if let newValue {
                append(key, newValue)
            }
        }
    }

    private mutating func append(_ key: String, _ value: JSONValue) {
        members.append((key, value))
        if index != nil {
            index![key] = members.count - 1
        } else if members.count > Self.indexThreshold {
            rebuildIndex()
        }
    }

    private mutating func rebuildIndex() {
        var rebuilt: [String: Int] = [:]
        rebuilt.reserveCapacity(members.count)
        for (offset, member) in members.enumerated() { rebuilt[member.key] = offset }
        index = rebuilt
    }

    /// Inserts a member that must not exist yet; returns false on a duplicate name.
    mutating func insertNew(_ key: String, _ value: JSONValue) -> Bool {
        guard position(of: key) == nil else { return false }
        append(key, value)
        return true
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> {
        members.makeIterator()
    }

    /// Equal when both hold the same members, in any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.members.allSatisfy { rhs[$0.key] == $0.value }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject()
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }
}

extension JSONValue {
    /// Whether any string or member name in this value holds U+0000. A NUL is valid JSON
    /// (`\u0000`) but no text column takes it (PostgreSQL refuses it, SQLite cuts C strings at it),
    /// so SETs, account-API bodies and imports that carry one are refused alike, with a 400.
    public var containsNUL: Bool {
        switch self {
        case .string(let text): return text.utf8.contains(0)
        case .array(let items): return items.contains { $0.containsNUL }
        case .object(let object): return object.contains { $0.key.utf8.contains(0) || $0.value.containsNUL }
        default: return false
        }
    }
}
