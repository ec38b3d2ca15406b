import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `trusted_proxies`: addresses (`10.0.0.7`, `2001:db8::7`) and ranges (`10.0.0.0/8`,
/// `2001:db8::/32`) whose `X-Forwarded-For` names the client, and which the per-address
/// connection limit exempts. Compared as addresses, not as text, so `::ffff:10.0.0.7` (an IPv4
/// peer on a dual-stack socket) matches `10.0.0.7`, and `2001:DB8::7` matches `2001:db8::7`.
/// An entry that is neither is a configuration error: a host name or a typo must not leave the
/// proxy silently untrusted (every client would then share the proxy's address).
public struct TrustedProxies: Sendable {
    struct Range: Sendable {
        let bytes: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var remaining = prefix
            for (mine, theirs) in zip(bytes, address) where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if mine & mask != theirs & mask { return false }
                remaining -= bits
            }
            return true
        }
    }

    let ranges: [Range]
    public var isEmpty: Bool { ranges.isEmpty }

    /// The entries' problems (empty when every entry is an address or a range).
    public static func problems(_ entries: [String]) -> [String] {
        entries.compactMap { entry in
            range(entry) == nil
                ? "trusted_proxies: '\(entry)' is not an IP address or a range such as 10.0.0.0/8 or 2001:db8::/32 (host names are not resolved)"
                : nil
        }
    }

    /// The valid entries (`problems` reports the others).
    public init(_ entries: [String]) {
        ranges = entries.compactMap(Self.range)
    }

    /// Whether `peer` (an address as text, as SwiftNIO gives it) is trusted.
    public func contains(_ peer: String?) -> Bool {
        guard !ranges.isEmpty, let peer, let address = Self.address(peer) else { return false }
        return ranges.contains { $0.contains(address) }
    }

    static func range(_ entry: String) -> Range? {
        let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let bytes = address(String(parts[0])) else { return nil }
        guard parts.count == 2 else { return Range(bytes: bytes, prefix: bytes.count * 8) }
        guard let prefix = Int(parts[1]), parts[1].allSatisfy(\.isASCII), (0...bytes.count * 8).contains(prefix) else { return nil }
        return Range(bytes: bytes, prefix: prefix)
    }

    /// 4 bytes for IPv4 (and IPv4-mapped IPv6), 16 for IPv6; nil for anything else.
    static func address(_ text: String) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &bytes) == 1 { return Array(bytes[..<4]) }
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return nil }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }
}
