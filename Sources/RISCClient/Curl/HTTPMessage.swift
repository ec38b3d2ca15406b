/// An outbound HTTP request made with libcurl.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// Whole-transfer time limit, seconds; nil: the client's `defaultTimeout`.
    public var timeout: Double?
    /// Time limit for the connection and its TLS handshake, seconds; nil: the client's `defaultConnectTimeout`.
    public var connectTimeout: Double?
    /// Largest response body accepted; a larger one fails the request.
    public var maxResponseBytes: Int

    public init(
        method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        timeout: Double? = nil, connectTimeout: Double? = nil, maxResponseBytes: Int = 1 << 20
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.maxResponseBytes = maxResponseBytes
    }
}

/// A response: status, header fields (names lower-cased, in order) and body.
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// The URL finally answered (after same-host redirects).
    public let url: String

    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.last { $0.name == lowered }?.value
    }

    /// `max-age` from `Cache-Control`, less `Age`; nil when absent. `no-store`/`no-cache` count as 0.
    public var maxAge: Double? {
        guard let control = header("cache-control")?.lowercased() else { return nil }
        var result: Double?
        for directive in control.split(separator: ",") {
            let part = directive.trimmingSpaces
            if part == "no-store" || part == "no-cache" { return 0 }
            if part.hasPrefix("max-age="), let seconds = Self.deltaSeconds(part.dropFirst(8)) { result = seconds }
        }
        guard var age = result else { return nil }
        if let ageHeader = header("age"), let elapsed = Self.deltaSeconds(ageHeader.trimmingSpaces) { age -= elapsed }
        return max(0, age)
    }

    /// RFC 9111 §1.2.2 delta-seconds: ASCII digits only (`Double()` would also take `nan`, `inf`
    /// or `1e400`), at most 2^31 (what a cache must accept as "infinity").
    static func deltaSeconds(_ text: some StringProtocol) -> Double? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return text.utf8.count > 10 ? 2_147_483_648 : min(Double(String(text)) ?? 0, 2_147_483_648)
    }
}

/// An outbound request that failed: a transport error, a refused URL, an oversized body.
public struct FetchError: Error, Sendable, CustomStringConvertible {
    public let url: String
    public let description: String
    public init(url: String, _ description: String) {
        self.url = url
        self.description = description
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" || last == "\r" || last == "\n" { slice = slice.dropLast() }
        return String(slice)
    }
}
