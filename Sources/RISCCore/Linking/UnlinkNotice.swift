import Foundation

/// Unlink notices (issue 15 §3, `../shared/docs/linking.md` §3): when the site revokes linked
/// tokens on its own side, risc tells Google with a signed `token-revoked` SET per token.
///
/// A notice is queued durably in the same transaction that marks the token revoked: a row of the
/// SET queue (`sets`) whose de-duplication scope is `queueIssuer`. Its stored token is a local
/// record (HS256 under the receiver's local key, like `LocalSET`) whose payload is exactly the
/// claims to publish; the worker that claims it signs that payload with the transmitter's active
/// key (`TransmitterKeys`) at the moment of sending and hands it to a `NoticePublisher`. So the
/// queue's retries, backoff, dead letters, leases, `risc queue` and event log serve notices as
/// they serve Google's SETs, on both stores, and a key rotation applies to every notice still
/// waiting.
///
/// Wire defaults, none of them confirmed by Google (each a setting): `aud`
/// `google_account_linking`; claims `iss`, `aud`, `iat`, `jti`, `events`, no `exp`; inside the
/// event object `subject_type: oauth_token`, `token_type`, `token_identifier_alg:
/// hash_SHA512_double` and `token` = lowercase hex of SHA-512(SHA-512(token)), computed from the
/// fingerprint the store keeps (`TokenFingerprint.hash` is the same digest in base64), so no raw
/// token is needed.
public struct UnlinkNotices: Sendable {
    /// The queue's de-duplication scope (the `issuer` column) of notices.
    public static let queueIssuer = "urn:risc:unlink-notices"
    public static let defaultAudience = "google_account_linking"
    public static let identifierAlgorithm = "hash_SHA512_double"

    /// The site's issuer URL (`iss`), which also roots its discovery document.
    public let issuer: String
    public let audience: String
    /// `token_type` of a notice when the caller names none (risc keeps linked tokens without
    /// telling access from refresh tokens): `refresh_token` by default.
    public let tokenType: String
    /// Signs the stored local records (never sent).
    let localKey: [UInt8]

    public init(issuer: String, audience: String = Self.defaultAudience, tokenType: String = "refresh_token", tokenKey: [UInt8]) {
        self.issuer = issuer
        self.audience = audience
        self.tokenType = tokenType
        localKey = LocalSET.signingKey(tokenKey: tokenKey)
    }

    /// Where the site's discovery document is (`[DEMO]`'s layout): `<issuer>/.well-known/risc-configuration`.
    public static func discoveryURL(issuer: String) -> String { issuer + "/.well-known/risc-configuration" }
    /// Where its JWK Set is: `<issuer>/.well-known/jwks.json`.
    public static func jwksURL(issuer: String) -> String { issuer + "/.well-known/jwks.json" }

    /// The discovery document: `issuer` and `jwks_uri`.
    public static func discoveryDocument(issuer: String) -> JSONValue {
        ["issuer": .string(issuer), "jwks_uri": .string(jwksURL(issuer: issuer))]
    }

    /// The path of an absolute URL (`/` when it has none), without query or fragment.
    public static func path(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...].prefix { $0 != "?" && $0 != "#" })
    }

    /// Token types a notice may name ([OAEV] §2.1).
    public static let tokenTypes: Set<String> = ["access_token", "refresh_token"]

    /// `hash_SHA512_double` (lowercase hex) from the store's base64 fingerprint; nil when it is
    /// not base64 of 64 bytes.
    public static func hexIdentifier(fromStoredHash hash: String) -> String? {
        guard let canonical = Base64URL.normalize(hash), let bytes = Base64URL.decode(canonical), bytes.count == 64 else { return nil }
        return bytes.lowercaseHex
    }

    /// The queue row of the notice for the linked token whose stored fingerprint is `tokenHash`.
    /// Its `jti` comes from the fingerprint: queuing the same token twice is one notice.
    public func record(tokenHash: String, tokenType: String? = nil, now: Double) throws -> QueuedNotice {
        guard let hex = Self.hexIdentifier(fromStoredHash: tokenHash) else {
            throw UnlinkNoticeError("a stored token fingerprint is not a SHA-512 digest")
        }
        let type = tokenType ?? self.tokenType
        let subject: JSONObject = [
            "subject_type": "oauth_token", "token_type": .string(type), "token_identifier_alg": .string(Self.identifierAlgorithm),
            "token": .string(hex),
        ]
        let jti = Self.noticeID(storedHash: tokenHash)
        let claims = Self.claims(issuer: issuer, audience: audience, issuedAt: now.rounded(.down), jti: jti, subject: subject)
        let header: JSONObject = ["alg": "HS256", "typ": "secevent+jwt", "kid": .string(LocalSET.keyID)]
        let input =
            Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "."
            + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8))
        let compact = input + "." + Base64URL.encode(HMACSHA256.mac(key: localKey, data: Array(input.utf8)))
        return QueuedNotice(
            tokenID: jti, claimedIssuer: issuer, issuedAt: now.rounded(.down), receivedAt: now,
            eventTypes: [EventType.tokenRevoked.uri], subjectsJSON: JSONValue.array([.object(subject)]).serialized, token: compact)
    }

    /// The claims to sign for a queued notice, rebuilt from what risc itself decided, or a
    /// `RefusedNotice` when the row is not one risc queued.
    ///
    /// A row of the queue is not trusted because it is in the store: whoever can write to the
    /// store (a shared PostgreSQL role, a leaked password) could otherwise have the site's notice
    /// key sign anything. So the stored record's HS256 MAC must verify under the local key (derived
    /// from the token key, which lives in a 0600 file, never in the store); its claims must have
    /// exactly the shape `record` gives (one `token-revoked` event about one `oauth_token` with a
    /// `hash_SHA512_double` identifier); and its `jti` must be the one derived from that
    /// identifier. What is signed is rebuilt from those checked values, not copied.
    public static func payloadToSign(stored compact: String, tokenID: String, localKey: [UInt8]) throws(RefusedNotice) -> [UInt8] {
        guard let jws = try? CompactJWS(Array(compact.utf8)), jws.header.algorithm.rawValue == "HS256", jws.header.keyID == LocalSET.keyID else {
            throw RefusedNotice("the queued record is not a local record risc made")
        }
        let expected = HMACSHA256.mac(key: localKey, data: Array(jws.signingInput))
        guard TokenFingerprint.constantTimeEquals(expected, jws.signature) else {
            throw RefusedNotice("the queued record's MAC does not verify under this receiver's token key")
        }
        guard let claims = try? JSONParser.parseObject(jws.payload), Set(claims.keys) == ["iss", "aud", "iat", "jti", "events"],
            let issuer = claims["iss"]?.stringValue, let audience = claims["aud"]?.stringValue, let issuedAt = claims["iat"]?.numberValue,
            issuedAt.isFinite, let events = claims["events"]?.objectValue, events.count == 1,
            let subject = events[EventType.tokenRevoked.uri]?.objectValue,
            Set(subject.keys) == ["subject_type", "token_type", "token_identifier_alg", "token"],
            subject["subject_type"] == "oauth_token", subject["token_identifier_alg"]?.stringValue == identifierAlgorithm,
            let tokenType = subject["token_type"]?.stringValue, tokenTypes.contains(tokenType),
            let hex = subject["token"]?.stringValue, hex.utf8.count == 128, hex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw RefusedNotice("the queued record's claims are not an unlink notice's") }
        let jti = Self.noticeID(storedHash: Base64URL.encodeStandard(hex.hexBytes))
        guard claims["jti"]?.stringValue == jti, tokenID == jti else {
            throw RefusedNotice("the queued record's jti is not the one its token identifier gives")
        }
        return Array(JSONValue.object(Self.claims(issuer: issuer, audience: audience, issuedAt: issuedAt, jti: jti, subject: subject)).serialized.utf8)
    }

    /// The `jti` of the notice for the token whose stored fingerprint is `storedHash`.
    static func noticeID(storedHash: String) -> String {
        "unlink-" + SHA256.hex(Array("risc unlink notice\u{0}\(storedHash)".utf8)).prefix(32)
    }

    static func claims(issuer: String, audience: String, issuedAt: Double, jti: String, subject: JSONObject) -> JSONObject {
        [
            "iss": .string(issuer), "aud": .string(audience), "iat": .number(issuedAt), "jti": .string(jti),
            "events": .object([EventType.tokenRevoked.uri: .object(subject)]),
        ]
    }
}

/// What a worker needs to send the queued notices: the publisher, and the token key under whose
/// local key risc MACs the records it queues (`UnlinkNotices.payloadToSign`).
public struct NoticeSending: Sendable {
    public let publisher: any NoticePublisher
    let localKey: [UInt8]

    public init(publisher: any NoticePublisher, tokenKey: [UInt8]) {
        self.publisher = publisher
        localKey = LocalSET.signingKey(tokenKey: tokenKey)
    }

    /// Checks a queued notice and publishes it; throws `RefusedNotice` (dead-letter it at once)
    /// for a row risc did not queue, anything else (retry) for a failed call.
    public func send(stored compact: String, tokenID: String) throws -> String {
        try publisher.publish(payload: UnlinkNotices.payloadToSign(stored: compact, tokenID: tokenID, localKey: localKey), tokenID: tokenID)
    }

    /// Sends with `sending`, or fails (to be retried) when there is none: notices are queued only
    /// where they are on, so a receiver without them is configured unlike the one that queued it.
    public static func send(_ sending: NoticeSending?, stored compact: String, tokenID: String) throws -> String {
        guard let sending else {
            throw UnlinkNoticeError("unlink notices are not configured on this receiver (linking.notices.issuer and key_dir)")
        }
        return try sending.send(stored: compact, tokenID: tokenID)
    }
}

/// A queued notice risc will not sign: not a record it made (see `UnlinkNotices.payloadToSign`).
/// Never retried: the worker dead-letters it at once, says why in the event log and counts it.
public struct RefusedNotice: Error, CustomStringConvertible, Unretryable {
    public let description: String
    public init(_ reason: String) { description = "refused to sign: \(reason)" }
}

/// A notice as the stores queue it (the columns of a `sets` row; `issuer` is `UnlinkNotices.queueIssuer`).
public struct QueuedNotice: Sendable {
    public let tokenID: String
    /// The site's issuer (the `iss` column).
    public let claimedIssuer: String
    public let issuedAt: Double
    public let receivedAt: Double
    public let eventTypes: [String]
    public let subjectsJSON: String
    public let token: String
    public var issuer: String { UnlinkNotices.queueIssuer }
    public static let contentType = "application/secevent+jwt"
}

public struct UnlinkNoticeError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Sends one unlink notice (its claims) to Google: signs and POSTs it. Called on the worker's own
/// thread, so it may block. Returns what the far side answered (for the event log); throws to
/// have the notice retried.
public protocol NoticePublisher: Sendable {
    func publish(payload: [UInt8], tokenID: String) throws -> String
}

/// What the site revoked on its own side, and the notices queued for it.
public struct LinkedTokenRevocation: Sendable, Equatable {
    /// The `revoked_reason` of tokens the site revoked on its own side.
    public static let siteReason = "site-unlink"

    /// Active linked tokens now marked revoked.
    public var revoked: Int
    /// Notices queued (one per revoked token, when notices are on).
    public var noticesQueued: Int
    /// Named tokens the account does not hold active (unknown or already revoked).
    public var notFound: Int

    public init(revoked: Int, noticesQueued: Int, notFound: Int) {
        self.revoked = revoked
        self.noticesQueued = noticesQueued
        self.notFound = notFound
    }

    public var json: JSONValue {
        ["revoked": .number(Double(revoked)), "notices_queued": .number(Double(noticesQueued)), "not_found": .number(Double(notFound))]
    }
}

extension String {
    /// The bytes of lowercase or uppercase hex text (pairs of digits); callers check the text first.
    var hexBytes: [UInt8] {
        var bytes: [UInt8] = []
        var high: UInt8?
        for unit in utf8 {
            let nibble: UInt8 = unit <= 0x39 ? unit - 0x30 : (unit | 0x20) - 0x61 + 10
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
