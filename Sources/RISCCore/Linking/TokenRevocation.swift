import CRiscOpenSSL

/// Google's call to the site's RFC 7009 token revocation endpoint when a user unlinks on
/// Google's side (`../shared/docs/linking.md` §2): a form POST with `client_id`, `client_secret`
/// (or HTTP Basic), `token` and an optional `token_type_hint`.
public struct RevocationRequest: Sendable, Equatable {
    public let clientID: String
    public let clientSecret: String
    /// How the client authenticated: `client_secret_basic` or `client_secret_post`.
    public let method: String
    public let token: String
    public let tokenTypeHint: String?

    /// Reads and checks a request; throws the RFC 6749 §5.2 error to answer with.
    public static func parse(body: [UInt8], contentType: String?, authorization: String?) throws(RevocationError) -> RevocationRequest {
        let mediaType = contentType?.split(separator: ";").first.map { $0.trimmingSpaces.lowercased() }
        guard mediaType == "application/x-www-form-urlencoded" else {
            throw .invalidRequest("the body must be application/x-www-form-urlencoded (RFC 7009 §2.1)")
        }
        let form = try FormBody.parse(body)
        var id = form["client_id"], secret = form["client_secret"], method = "client_secret_post"
        if let authorization {
            guard let credentials = Self.basic(authorization) else {
                throw RevocationError.invalidClient("client authentication failed")
            }
            // RFC 6749 §2.3: one authentication method per request.
            if secret != nil { throw .invalidRequest("client credentials in both the Authorization header and the body") }
            if let id, id != credentials.id { throw RevocationError.invalidClient("client authentication failed") }
            (id, secret, method) = (credentials.id, credentials.secret, "client_secret_basic")
        }
        guard let id, let secret else { throw RevocationError.invalidClient("client authentication is required") }
        guard let token = form["token"], !token.isEmpty else { throw .invalidRequest("the 'token' parameter is missing") }
        return RevocationRequest(clientID: id, clientSecret: secret, method: method, token: token, tokenTypeHint: form["token_type_hint"])
    }

    /// `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1); nil when malformed.
    static func basic(_ header: String) -> (id: String, secret: String)? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let normalized = Base64URL.normalize(String(parts[1].trimmingSpaces)), let bytes = Base64URL.decode(normalized),
            let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            let id = FormBody.decode(bytes[..<colon]), let secret = FormBody.decode(bytes[(colon + 1)...])
        else { return nil }
        return (id, secret)
    }
}

/// An RFC 6749 §5.2 error answer of the revocation endpoint.
public struct RevocationError: Error, Sendable, Equatable {
    public let status: Int
    /// `invalid_request`, `invalid_client`, `unsupported_token_type`.
    public let code: String
    public let description: String

    public static func invalidRequest(_ description: String) -> RevocationError {
        RevocationError(status: 400, code: "invalid_request", description: description)
    }

    /// Answered with `WWW-Authenticate: Basic` (RFC 6749 §5.2).
    public static func invalidClient(_ description: String) -> RevocationError {
        RevocationError(status: 401, code: "invalid_client", description: description)
    }

    public static func unsupportedTokenType(_ description: String) -> RevocationError {
        RevocationError(status: 400, code: "unsupported_token_type", description: description)
    }

    /// `{"error", "error_description"}`.
    public var body: String {
        JSONValue.object(["error": .string(code), "error_description": .string(description)]).serialized
    }
}

/// What the site configured for its revocation endpoint.
public struct RevocationPolicy: Sendable {
    /// The client id the site registered for Google (`linking.google_client_id`).
    public let clientID: String
    /// The secret the site issued to Google (`linking.client_secret_file`).
    let clientSecret: [UInt8]
    /// The token types risc revokes (`linking.revocation_token_types`): a call whose
    /// `token_type_hint` names another known type is answered `unsupported_token_type`; a hint
    /// that is no token type at all is ignored (RFC 7009 §2.1).
    public let tokenTypes: Set<String>

    public static let knownTokenTypes: Set<String> = ["access_token", "refresh_token"]

    public init(clientID: String, clientSecret: [UInt8], tokenTypes: Set<String> = RevocationPolicy.knownTokenTypes) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.tokenTypes = tokenTypes
    }

    /// Checks the client (both values compared in constant time, as digests so their lengths
    /// tell nothing) and the hint.
    public func check(_ request: RevocationRequest) throws(RevocationError) {
        let idMatches = Self.sameDigest(Array(request.clientID.utf8), Array(clientID.utf8))
        let secretMatches = Self.sameDigest(Array(request.clientSecret.utf8), clientSecret)
        guard idMatches && secretMatches else {
            throw .invalidClient("client authentication failed")
        }
        if let hint = request.tokenTypeHint, Self.knownTokenTypes.contains(hint), !tokenTypes.contains(hint) {
            throw .unsupportedTokenType("this server does not revoke \(hint)s")
        }
    }

    static func sameDigest(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let x = SHA256.hash(a), y = SHA256.hash(b)
        return CRYPTO_memcmp(x, y, x.count) == 0
    }
}

/// `application/x-www-form-urlencoded` bodies (WHATWG URL §5), strictly: every name once
/// (RFC 6749 §3.2), valid percent-escapes, UTF-8.
enum FormBody {
    static func parse(_ body: [UInt8]) throws(RevocationError) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? pair.endIndex
            guard let name = decode(pair[..<equals]),
                let value = decode(equals == pair.endIndex ? [] : pair[(equals + 1)...])
            else { throw .invalidRequest("the form body is not valid percent-encoded UTF-8") }
            guard fields.updateValue(value, forKey: name) == nil else {
                throw .invalidRequest("the parameter '\(Printable.safe(name, maxBytes: 40))' appears more than once")
            }
        }
        return fields
    }

    /// `+` is a space; `%XX` a byte; nil for a bad escape or bytes that are not UTF-8.
    static func decode(_ bytes: some Collection<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): out.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                out.append(high << 4 | low)
            default: out.append(byte)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return s
    }
}
