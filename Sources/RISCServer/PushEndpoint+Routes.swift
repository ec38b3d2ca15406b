import Foundation
import NIOHTTP1
import RISCCore

extension PushEndpoint {
    /// What a request's path is served by: the push endpoint, the revocation endpoint, one of the
    /// notice documents, or nothing.
    enum Route {
        /// The intake, with the path (the transmitter's, or the shared one) it came to.
        case events(path: String), revocation(RevocationIntake), document(NoticeDocuments, NoticeDocuments.Document)

        /// The methods it answers; any other gets 405 with these in `Allow`.
        var methods: [HTTPMethod] {
            if case .document = self { return [.GET, .HEAD] }
            return [.POST]
        }
    }

    func route(_ head: HTTPRequestHead) -> Route? {
        let path = Self.path(of: head.uri)
        if intake.transmitters.serves(path) || (intake.transmitters.sharedPath == nil && path == settings.path) { return .events(path: String(path)) }
        if let revocation, path == settings.revocationPath ?? "" { return .revocation(revocation) }
        if let documents, let document = documents.document(at: path) { return .document(documents, document) }
        return nil
    }

    /// The path a request target names: origin-form (`/events?x=1`), or absolute-form
    /// (`https://receiver.example/events`), which RFC 9112 §3.2.2 has a server accept (a proxy
    /// may forward that form); its authority is not checked, as a Host field is not.
    static func path(of target: String) -> Substring {
        var rest = target[...]
        // Origin-form starts with '/' (every request from a transmitter): nothing to search for.
        if rest.first != "/", let separator = rest.range(of: "://"), ["http", "https"].contains(rest[..<separator.lowerBound].lowercased()) {
            rest = rest[separator.upperBound...]
            rest = rest.firstIndex { $0 == "/" || $0 == "?" }.map { rest[$0...] } ?? ""
            if !rest.hasPrefix("/") { return "/" }
        }
        return rest.firstIndex(of: "?").map { rest[..<$0] } ?? rest
    }

    /// Why a head is one RFC 9112 has a server answer 400: an HTTP/1.1 request without a Host
    /// field, or any request with more than one, or with one that is no `host[:port]` (§3.2); an
    /// HTTP/1.0 request with a Transfer-Encoding, whose framing cannot be trusted (§6.1). Nil when
    /// it is none of those.
    static func headProblem(_ head: HTTPRequestHead) -> String? {
        let atLeast11 = head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1)
        if !atLeast11, head.headers.contains(name: "transfer-encoding") {
            return "Transfer-Encoding in an HTTP/1.0 request: its framing cannot be trusted (RFC 9112 §6.1)"
        }
        let hosts = head.headers["host"]
        if hosts.count > 1 { return "more than one Host field (RFC 9112 §3.2)" }
        guard let host = hosts.first else { return atLeast11 ? "an HTTP/1.1 request without a Host field (RFC 9112 §3.2)" : nil }
        return host.utf8.allSatisfy(isHostByte) ? nil : "a Host field that is not host[:port] (RFC 9112 §3.2)"
    }

    /// uri-host [ ":" port ]: unreserved, percent-encoded, sub-delims, and an IP literal's brackets
    /// and colons (this runs for every request: no set is built).
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"): true
        case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="): true
        default: false
        }
    }

    /// The request's transfer codings besides `chunked` (which the decoder has taken off), as sent;
    /// nil when there are none.
    static func undecodedTransferCodings(_ head: HTTPRequestHead) -> String? {
        let codings = head.headers["transfer-encoding"].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let others = codings.filter { $0 != "chunked" }
        return others.isEmpty ? nil : Printable.safe(others.joined(separator: ", "), maxBytes: 60)
    }
}
