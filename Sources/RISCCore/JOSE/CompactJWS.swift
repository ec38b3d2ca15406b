#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JWS in compact serialization, split and decoded but **not yet verified**
/// (RFC 7515 §3.1, §5.2 steps 1–7).
///
/// Strict: exactly three base64url segments without padding or whitespace, a non-empty
/// signature, a protected header that is a UTF-8 JSON object with unique member names and a
/// string `alg`. A `crit` header is refused, since risc understands no extension (§4.1.11).
/// `jku`, `x5u`, `jwk` and `x5c` are never used to find keys (RFC 8725 §3.10).
public struct CompactJWS: Sendable {
    public let header: JOSEHeader
    public let payload: [UInt8]
    public let signature: [UInt8]
    /// `BASE64URL(header) '.' BASE64URL(payload)`: the bytes the signature covers, as sent.
    public let signingInput: ArraySlice<UInt8>

    public init(_ token: some Collection<UInt8>) throws(SETError) {
        try self.init(bytes: Array(token))
    }

    init(bytes: [UInt8]) throws(SETError) {
        let dots = bytes.withUnsafeBufferPointer { buffer -> (Int, Int, Bool) in
            guard let base = buffer.baseAddress else { return (0, 0, false) }
            func find(from start: Int) -> Int? {
                guard start < buffer.count, let hit = memchr(base + start, 0x2E, buffer.count - start) else { return nil }
                return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            }
            guard let first = find(from: 0), let second = find(from: first + 1) else { return (0, 0, false) }
            return (first, second, find(from: second + 1) == nil)
        }
        guard dots.2 else { throw .invalidRequest("not a compact JWS: expected three dot-separated parts") }
        let (first, second) = (dots.0, dots.1)
        guard let headerBytes = Base64URL.decode(bytes[..<first]), !headerBytes.isEmpty else {
            throw .invalidRequest("JWS header is not base64url")
        }
        guard let payload = Base64URL.decode(bytes[(first + 1)..<second]) else {
            throw .invalidRequest("JWS payload is not base64url")
        }
        guard second + 1 < bytes.count else { throw .invalidRequest("JWS has an empty signature (unsecured JWS)") }
        guard let signature = Base64URL.decode(bytes[(second + 1)...]) else {
            throw .invalidRequest("JWS signature is not base64url")
        }
        self.header = try JOSEHeader(bytes: headerBytes)
        self.payload = payload
        self.signature = signature
        self.signingInput = bytes[..<second]
    }

    public init(_ token: String) throws(SETError) {
        try self.init(Array(token.utf8))
    }
}

/// The protected JOSE header of a JWS (RFC 7515 §4).
public struct JOSEHeader: Sendable {
    public let algorithm: JWSAlgorithm
    public let keyID: String?
    public let type: String?
    public let fields: JSONObject

    init(bytes: [UInt8]) throws(SETError) {
        let object: JSONObject
        do { object = try JSONParser.parseObject(bytes) } catch {
            throw SETError(.invalidRequest, "JWS header is not a valid JSON object: \(error)", underlying: error)
        }
        guard let alg = object["alg"]?.stringValue, !alg.isEmpty else {
            throw .invalidRequest("JWS header has no 'alg' string")
        }
        if object["crit"] != nil {
            throw .invalidRequest("JWS header lists 'crit' extensions, which this receiver does not understand")
        }
        if let kid = object["kid"], kid.stringValue == nil { throw .invalidRequest("JWS header 'kid' is not a string") }
        if let typ = object["typ"], typ.stringValue == nil { throw .invalidRequest("JWS header 'typ' is not a string") }
        algorithm = JWSAlgorithm(rawValue: alg)
        keyID = object["kid"]?.stringValue
        type = object["typ"]?.stringValue
        fields = object
    }
}

/// A JWS whose signature verified with a key that was allowed to verify it.
/// Only `SignatureVerifier` makes one.
public struct VerifiedJWS: Sendable {
    public let header: JOSEHeader
    public let payload: [UInt8]
    init(_ jws: CompactJWS) {
        header = jws.header
        payload = jws.payload
    }
}
