import CNIOLinux
import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// What the per-address limits count by: an IPv4 address as it is, an IPv6 address by its /64
/// (one customer's network hands out a whole /64, so counting single addresses would give one
/// client 2^64 allowances), an IPv4-mapped IPv6 address as the IPv4 address. The connection caps
/// (public and admin listeners) and the invalid-request limiter group alike.
enum AddressGroup {
    /// The group of a peer's socket address; nil when it has none (a Unix socket).
    static func key(_ address: SocketAddress?) -> String? {
        guard case .v6(let v6) = address else { return address?.ipAddress }
        return key(bytes: withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) })
    }

    /// A peer's address as text, an IPv4-mapped IPv6 address (an IPv4 client of a listener on `::`)
    /// as the IPv4 address it is, so that a client reads the same whatever the listen address.
    static func ip(_ address: SocketAddress?) -> String? {
        guard case .v6(let v6) = address else { return address?.ipAddress }
        return mappedIPv4(withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }) ?? address?.ipAddress
    }

    /// The IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) stands for; nil for any other.
    private static func mappedIPv4(_ bytes: [UInt8]) -> String? {
        guard bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF else { return nil }
        return bytes[12...].map(String.init).joined(separator: ".")
    }

    /// The group of an address as text: `192.0.2.7`, `2001:db8::1`, `[2001:db8::1]` (as the
    /// push endpoint writes client addresses) or anything else, which is its own group.
    static func key(text: String) -> String {
        let bare = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return text }
        return key(bytes: withUnsafeBytes(of: v6) { Array($0) })
    }

    private static func key(bytes: [UInt8]) -> String {
        if let ipv4 = mappedIPv4(bytes) { return ipv4 }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
