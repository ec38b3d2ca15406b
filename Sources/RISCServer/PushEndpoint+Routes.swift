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
        let path = head.uri.firstIndex(of: "?").map { head.uri[..<$0] } ?? head.uri[...]
        if intake.transmitters.serves(path) || (intake.transmitters.sharedPath == nil && path == settings.path) { return .events(path: String(path)) }
        if let revocation, path == settings.revocationPath ?? "" { return .revocation(revocation) }
        if let documents, let document = documents.document(at: path) { return .document(documents, document) }
        return nil
    }
}
