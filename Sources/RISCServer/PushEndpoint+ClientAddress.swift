import Foundation
import NIOCore
import NIOHTTP1
import RISCCore

extension PushEndpoint {
    /// A connection's peer: its address as the trusted proxies are listed (`ip`) and as the log
    /// writes it (`IP` or `[IPv6]`; an IPv4-mapped one as its IPv4 address). Made once a
    /// connection (it cannot change there): formatting the address was 1 % of the event loops'
    /// time when done for every request.
    struct Peer {
        let ip: String?
        let written: String?

        init(_ address: SocketAddress?) {
            ip = AddressGroup.ip(address)
            written = ip.map { $0.utf8.contains(UInt8(ascii: ":")) ? "[\($0)]" : $0 }
        }
    }

    /// The client's address: the peer's, or, when the peer is a trusted proxy, the last address
    /// in its `X-Forwarded-For` (the one the proxy itself saw).
    func clientAddress(_ peer: Peer, headers: HTTPHeaders) -> String? {
        guard let ip = peer.ip, case let proxies = limits.trustedProxies, !proxies.isEmpty, proxies.contains(ip),
            let forwarded = headers.first(name: "X-Forwarded-For"),
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty
        else { return peer.written }
        return Printable.safe(last, maxBytes: 64)
    }
}
