import Foundation
import NIOCore
import NIOHTTP1
import RISCCore

extension PushEndpoint {
    /// The client's address: the peer's (`IP` or `[IPv6]`), or, when the peer is a trusted proxy,
    /// the last address in its `X-Forwarded-For` (the one the proxy itself saw).
    func clientAddress(peer: SocketAddress?, headers: HTTPHeaders) -> String? {
        let peer = peer?.ipAddress
        guard let peer, limits.trustedProxies.contains(peer),
            let forwarded = headers.first(name: "X-Forwarded-For"),
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty
        else { return peer.map { $0.utf8.contains(UInt8(ascii: ":")) ? "[\($0)]" : $0 } }
        return Printable.safe(last, maxBytes: 64)
    }
}
