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

    /// What makes the authority of `url` (which `components` read) one no fetch can use: a host
    /// that is no host name, IPv4 or bracketed IPv6 address (an escape, a stray character), or a
    /// port that is not 1–65535. nil when it is fine.
    static func authorityProblem(_ url: String) -> String? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var host = authority, port: Substring = ""
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { return "the port must follow the host as :NUMBER, got \(after)" }
                port = after.dropFirst()
            }
            var address = in6_addr()
            if inet_pton(AF_INET6, String(host), &address) != 1 { return "the host [\(host)] is not an IPv6 address" }
        } else {
            if let colon = authority.lastIndex(of: ":") { (host, port) = (authority[..<colon], authority[authority.index(after: colon)...]) }
            if host.contains(where: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }) {
                return "the host \(host) is not a host name or IP address"
            }
        }
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
