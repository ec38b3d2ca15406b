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
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let rest = url[schemeEnd.upperBound...]
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if authority.contains("@") { return nil }  // no credentials in URLs
        var host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
        } else {
            if let colon = authority.lastIndex(of: ":") { authority = authority[..<colon] }
            host = authority
        }
        guard !host.isEmpty, scheme == "https" || scheme == "http" else { return nil }
        return (scheme, host.lowercased())
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
        guard let (scheme, host) = Self.components(url) else { return "not an absolute http(s) URL" }
        if scheme == "https" { return nil }
        if allowPlainHTTPOnLoopback, Self.isLoopback(host: host) { return nil }
        return "plain HTTP is allowed only to loopback addresses; use https (host \(host))"
    }
}
