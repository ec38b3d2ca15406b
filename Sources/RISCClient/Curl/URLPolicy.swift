import Foundation

/// Which URLs risc may fetch: HTTPS, or plain HTTP to a loopback address when allowed (tests,
/// the dev issuer). The same host rule decides which redirects may be followed.
public struct URLPolicy: Sendable {
    public var allowPlainHTTPOnLoopback: Bool

    public init(allowPlainHTTPOnLoopback: Bool = true) {
        self.allowPlainHTTPOnLoopback = allowPlainHTTPOnLoopback
    }

    /// The scheme and host of an absolute http(s) URL, lower-cased; nil otherwise.
    public static func components(_ url: String) -> (scheme: String, host: String)? {
        authority(url).map { ($0.scheme, $0.host.lowercased()) }
    }

    /// An absolute http(s) URL's scheme (lower-cased), host (without brackets), whether the host
    /// was bracketed, and what follows the host (`:PORT`, or nothing); nil when it has no scheme
    /// or host, or carries credentials.
    private static func authority(_ url: String) -> (scheme: String, host: Substring, bracketed: Bool, rest: Substring)? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.contains("@") { return nil }  // no credentials in URLs
        let parts: (host: Substring, bracketed: Bool, rest: Substring)
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            parts = (authority[authority.index(after: authority.startIndex)..<close], true, authority[authority.index(after: close)...])
        } else if let colon = authority.lastIndex(of: ":") {
            parts = (authority[..<colon], false, authority[colon...])
        } else {
            parts = (authority, false, "")
        }
        guard !parts.host.isEmpty, scheme == "https" || scheme == "http" else { return nil }
        return (scheme, parts.host, parts.bracketed, parts.rest)
    }

    /// What makes the authority of `url` one no fetch can use: a host that is no host name, IPv4
    /// or bracketed IPv6 address (an escape, a stray character), or a port that is not 1–65535.
    /// nil when it is fine (or when `components` refuses the URL).
    static func authorityProblem(_ url: String) -> String? {
        guard let (_, host, bracketed, rest) = authority(url) else { return nil }
        if bracketed {
            var address = in6_addr()
            if inet_pton(AF_INET6, String(host), &address) != 1 { return "the host [\(host)] is not an IPv6 address" }
        } else if host.contains(where: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }) {
            return "the host \(host) is not a host name or IP address"
        }
        guard rest.isEmpty || rest.first == ":" else { return "the port must follow the host as :NUMBER, got \(rest)" }
        let port = rest.dropFirst()
        guard port.isEmpty || port.allSatisfy({ $0.isASCII && $0.isNumber }) && Int(port).map({ (1...65_535).contains($0) }) == true else {
            return "the port must be 1–65535, got \(port)"
        }
        return nil
    }

    /// Whether `host` is a loopback address: an IPv4 address in 127.0.0.0/8 or the IPv6 `::1`,
    /// decided from the parsed address (so `127.attacker.example` is not), or `localhost`, which
    /// libcurl resolves to loopback itself, never through DNS.
    public static func isLoopback(host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        let literal = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard inet_pton(AF_INET6, literal, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        return bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
    }

    /// Why `url` may not be fetched, or nil when it may.
    public func refusal(for url: String) -> String? {
        if url.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            return "a URL has no space or control character"
        }
        guard let (scheme, host) = Self.components(url) else { return "not an absolute http(s) URL" }
        if let problem = Self.authorityProblem(url) { return problem }
        if scheme == "https" { return nil }
        if allowPlainHTTPOnLoopback, Self.isLoopback(host: host) { return nil }
        return "plain HTTP is allowed only to loopback addresses; use https (host \(host))"
    }
}
