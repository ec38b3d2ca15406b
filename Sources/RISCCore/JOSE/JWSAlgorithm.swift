/// A JWS `alg` value (RFC 7518 §3, RFC 8037, RFC 9864).
///
/// Only the asymmetric signature algorithms can be enabled. `none` and the HMAC family are
/// representable, so they can be named in errors, but never verify (RFC 8725 §2.1, §3.1).
public struct JWSAlgorithm: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    /// How this algorithm signs; nil for anything risc does not implement (`none`, `HS256`, …).
    /// Worked out once here, since every verification consults it several times.
    public let family: Family?

    public init(rawValue: String) {
        self.rawValue = rawValue
        self.family = Self.family(of: rawValue)
    }

    public static func == (lhs: JWSAlgorithm, rhs: JWSAlgorithm) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    public var description: String { rawValue }

    public static let rs256 = JWSAlgorithm(rawValue: "RS256")
    public static let rs384 = JWSAlgorithm(rawValue: "RS384")
    public static let rs512 = JWSAlgorithm(rawValue: "RS512")
    public static let ps256 = JWSAlgorithm(rawValue: "PS256")
    public static let ps384 = JWSAlgorithm(rawValue: "PS384")
    public static let ps512 = JWSAlgorithm(rawValue: "PS512")
    public static let es256 = JWSAlgorithm(rawValue: "ES256")
    public static let es384 = JWSAlgorithm(rawValue: "ES384")
    public static let es512 = JWSAlgorithm(rawValue: "ES512")
    /// RFC 8037 polymorphic EdDSA; risc supports the Ed25519 curve only.
    public static let eddsa = JWSAlgorithm(rawValue: "EdDSA")
    /// RFC 9864 fully-specified Ed25519.
    public static let ed25519 = JWSAlgorithm(rawValue: "Ed25519")

    /// Every algorithm risc can verify.
    public static let supported: [JWSAlgorithm] = [
        .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .es256, .es384, .es512, .eddsa, .ed25519,
    ]

    /// What Google RISC uses, and the default allow-list (both of Google's samples pin RS256).
    public static let defaultAllowed: Set<JWSAlgorithm> = [.rs256]

    /// The SHA-2 digest an algorithm hashes with.
    public enum Digest: String, Sendable, Equatable {
        case sha256 = "SHA256"
        case sha384 = "SHA384"
        case sha512 = "SHA512"
    }

    /// How an algorithm signs: the key type it needs and its digest.
    public enum Family: Sendable, Equatable {
        case rsaPKCS1(digest: Digest)
        case rsaPSS(digest: Digest)
        /// `curve` is the JWK `crv`; `coordinateSize` the byte length of r and of s.
        case ecdsa(digest: Digest, curve: String, coordinateSize: Int)
        case eddsa

        /// The digest, nil for EdDSA (which hashes internally).
        public var digest: Digest? {
            switch self {
            case .rsaPKCS1(let digest), .rsaPSS(let digest), .ecdsa(let digest, _, _): digest
            case .eddsa: nil
            }
        }
    }

    private static func family(of rawValue: String) -> Family? {
        switch rawValue {
        case "RS256": .rsaPKCS1(digest: .sha256)
        case "RS384": .rsaPKCS1(digest: .sha384)
        case "RS512": .rsaPKCS1(digest: .sha512)
        case "PS256": .rsaPSS(digest: .sha256)
        case "PS384": .rsaPSS(digest: .sha384)
        case "PS512": .rsaPSS(digest: .sha512)
        case "ES256": .ecdsa(digest: .sha256, curve: "P-256", coordinateSize: 32)
        case "ES384": .ecdsa(digest: .sha384, curve: "P-384", coordinateSize: 48)
        case "ES512": .ecdsa(digest: .sha512, curve: "P-521", coordinateSize: 66)
        case "EdDSA", "Ed25519": .eddsa
        default: nil
        }
    }

    /// `none` and HMAC: refused whatever the configuration says.
    public var isForbidden: Bool {
        // Byte comparisons: this runs for every request, before any key lookup.
        let utf8 = rawValue.utf8
        func lower(_ byte: UInt8) -> UInt8 { byte | 0x20 }
        if utf8.count == 4, utf8.elementsEqual("none".utf8, by: { lower($0) == $1 }) { return true }
        guard utf8.count >= 2 else { return false }
        return lower(utf8[utf8.startIndex]) == UInt8(ascii: "h")
            && lower(utf8[utf8.index(after: utf8.startIndex)]) == UInt8(ascii: "s")
    }

    /// The JWK `kty` this algorithm's keys have.
    public var keyType: String {
        switch family {
        case .rsaPKCS1, .rsaPSS: "RSA"
        case .ecdsa: "EC"
        case .eddsa: "OKP"
        case nil: "oct"
        }
    }
}
