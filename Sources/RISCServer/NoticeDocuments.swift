import Foundation
import NIOHTTP1
import RISCCore

/// What Google reads to check the site's unlink notices (`UnlinkNotices`): the discovery document
/// at `<issuer>/.well-known/risc-configuration` and the JWK Set it names, served on the public
/// listener at those URLs' paths. The JWKS is read from the key directory as `risc keys` changes
/// it, with the published public keys only.
struct NoticeDocuments: Sendable {
    let discoveryPath: String
    let jwksPath: String
    let discovery: String
    let keys: TransmitterKeyCache

    enum Document: Sendable { case discovery, jwks }

    /// Caches may keep either for this long; a new key should be published at least this long
    /// before it signs (`risc keys generate`, later `risc keys activate`).
    static let maxAge = 300

    init(issuer: String, keys: TransmitterKeyCache) {
        discoveryPath = UnlinkNotices.path(of: UnlinkNotices.discoveryURL(issuer: issuer))
        jwksPath = UnlinkNotices.path(of: UnlinkNotices.jwksURL(issuer: issuer))
        discovery = UnlinkNotices.discoveryDocument(issuer: issuer).serialized
        self.keys = keys
    }

    func document(at path: Substring) -> Document? {
        path == discoveryPath ? .discovery : path == jwksPath ? .jwks : nil
    }

    /// The answer to a GET (or HEAD) of `document`.
    func answer(_ document: Document) -> (status: HTTPResponseStatus, headers: [(String, String)], body: String) {
        let headers = [("Content-Type", "application/json"), ("Cache-Control", "public, max-age=\(Self.maxAge)")]
        switch document {
        case .discovery:
            return (.ok, headers, discovery)
        case .jwks:
            do { return (.ok, headers, try keys.current().jwks.serialized) } catch {
                return (.serviceUnavailable, [("Retry-After", "60")], "")
            }
        }
    }
}
