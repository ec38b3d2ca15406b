/// Who or what an event is about.
///
/// Google uses the pre-RFC 9493 RISC form, `subject_type` inside the event (spec §1.7); RFC 9493
/// and SSF use `format`, and SSF puts the subject in a top-level `sub_id`. Both are read; an
/// unknown form is kept as `.other`, not refused. A known form with missing or mistyped
/// members is an error (RFC 8935 §2.4 `invalid_request`: "an event payload doesn't match").
public indirect enum Subject: Sendable, Equatable {
    /// `iss-sub` / `iss_sub`: an account at an issuer. For Google, `sub` is the Google Account ID.
    case issuerSubject(issuer: String, subject: String)
    /// Google's `id_token_claims`: any of `sub` (with `iss`), `email`, `phone_number`.
    case idTokenClaims(issuer: String?, subject: String?, email: String?, phoneNumber: String?)
    /// `oauth_token` (OAuth Event Types §2.1): a refresh token named by prefix or hash.
    case oauthToken(OAuthTokenIdentifier)
    case email(String)
    case phoneNumber(String)
    /// RFC 9493 `account` (an `acct:` URI).
    case account(uri: String)
    case opaque(id: String)
    case uri(String)
    case did(url: String)
    /// RFC 9493 `aliases`: several identifiers of one entity.
    case aliases([Subject])
    /// An SSF 1.0 complex subject (§3.2): several parts of one subject, each a simple subject
    /// under its name (`user`, `session`, `device`, `tenant`, `application`, `org_unit`, `group`),
    /// in the order of `complexMembers`, then any other member alphabetically.
    case complex([Part])
    /// A form risc does not know; kept with its members.
    case other(form: String, members: JSONObject)

    /// One part of a complex subject: its member name and the subject there.
    public struct Part: Sendable, Equatable {
        public let name: String
        public let subject: Subject
    }

    /// SSF 1.0 §3.2's members of a complex subject, in the order risc keeps them.
    public static let complexMembers = ["user", "session", "device", "tenant", "application", "org_unit", "group"]

    /// The part of a complex subject named `name` (`user`, `session`, …); nil for a simple subject.
    public func member(_ name: String) -> Subject? {
        guard case .complex(let parts) = self else { return nil }
        return parts.first { $0.name == name }?.subject
    }

    /// The form's name as it appeared (`iss-sub`, `iss_sub`, `email`, …).
    public struct Parsed: Sendable, Equatable {
        public let subject: Subject
        public let form: String
    }

    /// Reads a subject object: `subject_type` (Google, RISC 2018) or `format` (RFC 9493).
    public static func parse(_ object: JSONObject, nested: Bool = false) throws(SETError) -> Subject {
        let form: String
        if let type = object["subject_type"] {
            guard let text = type.stringValue else { throw .invalidRequest("subject 'subject_type' is not a string") }
            form = text
        } else if let format = object["format"] {
            guard let text = format.stringValue else { throw .invalidRequest("subject 'format' is not a string") }
            form = text
        } else if !nested, let complex = try complex(object) {
            return complex
        } else {
            throw .invalidRequest("subject has neither 'subject_type' nor 'format'")
        }
        func required(_ name: String) throws(SETError) -> String {
            guard let text = object[name]?.stringValue, !text.isEmpty else {
                throw .invalidRequest("subject of type '\(Printable.safe(form, maxBytes: 32))' needs a non-empty '\(Printable.safe(name, maxBytes: 40))' string")
            }
            return text
        }
        func optional(_ name: String) throws(SETError) -> String? {
            guard let value = object[name] else { return nil }
            guard let text = value.stringValue else { throw .invalidRequest("subject member '\(Printable.safe(name, maxBytes: 40))' is not a string") }
            return text
        }
        switch form {
        case "iss-sub", "iss_sub":
            return .issuerSubject(issuer: try required("iss"), subject: try required("sub"))
        case "id_token_claims":
            let subject = try optional("sub"), issuer = try optional("iss")
            let email = try optional("email"), phone = try optional("phone_number")
            guard subject != nil || email != nil || phone != nil else {
                throw .invalidRequest("id_token_claims subject needs 'sub', 'email' or 'phone_number'")
            }
            return .idTokenClaims(issuer: issuer, subject: subject, email: email, phoneNumber: phone)
        case "oauth_token":
            return .oauthToken(
                OAuthTokenIdentifier(
                    tokenType: try required("token_type"),
                    algorithm: .init(rawValue: try required("token_identifier_alg")),
                    token: try required("token")))
        case "email": return .email(try required("email"))
        case "phone_number": return .phoneNumber(try required("phone_number"))
        case "phone":
            // RISC 2018 §2.1.2 names the member `phone`; its own example uses `phone_number`.
            if let phone = try optional("phone") { return .phoneNumber(phone) }
            return .phoneNumber(try required("phone_number"))
        case "account": return .account(uri: try required("uri"))
        case "opaque": return .opaque(id: try required("id"))
        case "uri": return .uri(try required("uri"))
        case "did": return .did(url: try required("url"))
        case "aliases":
            guard !nested else { throw .invalidRequest("'aliases' subjects must not nest (RFC 9493 §3.2.8)") }
            guard let items = object["identifiers"]?.arrayValue, !items.isEmpty else {
                throw .invalidRequest("'aliases' subject needs a non-empty 'identifiers' array")
            }
            var subjects: [Subject] = []
            for item in items {
                guard let member = item.objectValue else { throw .invalidRequest("'aliases' identifier is not an object") }
                subjects.append(try parse(member, nested: true))
            }
            return .aliases(subjects)
        default:
            return .other(form: form, members: object)
        }
    }

    /// An SSF complex subject: an object without `format` whose members are simple subjects. Nil
    /// when no member is an object (not a complex subject at all); a member that is an object but
    /// not a subject, or a complex subject inside one, is `invalid_request`.
    static func complex(_ object: JSONObject) throws(SETError) -> Subject? {
        var parts: [Part] = []
        let names = object.keys.sorted { (complexMembers.firstIndex(of: $0) ?? Int.max, $0) < (complexMembers.firstIndex(of: $1) ?? Int.max, $1) }
        for name in names {
            guard let member = object[name]?.objectValue else {
                guard complexMembers.contains(name) else { continue }
                throw .invalidRequest("complex subject member '\(name)' is not a subject object")
            }
            parts.append(Part(name: name, subject: try parse(member, nested: true)))
        }
        return parts.isEmpty ? nil : .complex(parts)
    }

    /// The id a session subject (a complex subject's `session` part) names, as a site's session
    /// record would hold it: an `opaque` subject's `id`, a `uri`, or an unknown form's `id` string.
    public var sessionID: String? {
        switch self {
        case .opaque(let id): id
        case .uri(let uri): uri
        case .other(_, let members): members["id"]?.stringValue
        default: nil
        }
    }

    /// The Google Account ID (`sub`) this subject names, if it names one.
    public var googleSubject: (issuer: String?, subject: String)? {
        switch self {
        case .issuerSubject(let issuer, let subject): (issuer, subject)
        case .idTokenClaims(let issuer, let subject?, _, _): (issuer, subject)
        case .aliases(let items): items.lazy.compactMap(\.googleSubject).first
        case .complex: member("user")?.googleSubject
        default: nil
        }
    }

    /// A flat JSON rendering with a `type` member, for the CLI and the event log.
    public var json: JSONValue {
        var object = JSONObject()
        func put(_ name: String, _ value: String?) { if let value { object[name] = .string(value) } }
        switch self {
        case .issuerSubject(let issuer, let subject):
            put("type", "iss_sub"); put("iss", issuer); put("sub", subject)
        case .idTokenClaims(let issuer, let subject, let email, let phone):
            put("type", "id_token_claims"); put("iss", issuer); put("sub", subject); put("email", email)
            put("phone_number", phone)
        case .oauthToken(let token):
            // The identifier is a prefix or hash, never the token; still, print only its algorithm and length.
            put("type", "oauth_token"); put("token_type", token.tokenType)
            put("token_identifier_alg", token.algorithm.rawValue)
            object["token_identifier_length"] = .number(Double(token.token.count))
        case .email(let email): put("type", "email"); put("email", email)
        case .phoneNumber(let phone): put("type", "phone_number"); put("phone_number", phone)
        case .account(let uri): put("type", "account"); put("uri", uri)
        case .opaque(let id): put("type", "opaque"); put("id", id)
        case .uri(let uri): put("type", "uri"); put("uri", uri)
        case .did(let url): put("type", "did"); put("url", url)
        case .aliases(let items):
            put("type", "aliases")
            object["identifiers"] = .array(items.map(\.json))
        case .complex(let parts):
            put("type", "complex")
            for part in parts { object[part.name] = part.subject.json }
        case .other(let form, _): put("type", form)
        }
        return .object(object)
    }
}

/// An OAuth token identifier in a `token-revoked` event (spec §1.9).
public struct OAuthTokenIdentifier: Sendable, Equatable {
    /// `token_identifier_alg`.
    public struct Algorithm: Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The first 16 characters of the token.
        public static let prefix = Algorithm(rawValue: "prefix")
        /// `base64(SHA-512(SHA-512(token)))`.
        public static let hashSHA512SHA512 = Algorithm(rawValue: "hash_base64_sha512_sha512")
        public static let plain = Algorithm(rawValue: "plain")
    }

    /// `token_type`: Google sends `refresh_token` only.
    public let tokenType: String
    public let algorithm: Algorithm
    /// The identifier (prefix or hash), never logged in full.
    public let token: String

    public init(tokenType: String, algorithm: Algorithm, token: String) {
        self.tokenType = tokenType
        self.algorithm = algorithm
        self.token = token
    }
}
