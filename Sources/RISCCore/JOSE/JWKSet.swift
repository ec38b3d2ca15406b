/// A JWK Set (RFC 7517 §5) indexed by `kid`.
///
/// Keys that cannot be used (unknown `kty`, symmetric keys, bad members, an EC point off its
/// curve) are skipped, as RFC 7517 §5 asks, and listed in `skipped`. A set with no usable key
/// is an error: a cache must never replace a good set with an empty one.
///
/// A `kid` that names several keys is kept with all of them: verification then uses the one key
/// among them that fits the token's `alg` (type, curve, pinned `alg`, `use`), and refuses the
/// token as ambiguous when more than one fits, rather than letting whichever came first win.
public struct JWKSet: Sendable {
    public let keys: [JWK]
    /// Why each unusable key was skipped (no key material in these strings).
    public let skipped: [String]
    private let byID: [String: [JWK]]

    public init(keys: [JWK]) {
        self.keys = keys
        self.skipped = []
        var index: [String: [JWK]] = [:]
        for key in keys { if let id = key.keyID { index[id, default: []].append(key) } }
        byID = index
    }

    /// Reads `{"keys": [...]}`.
    public init(json bytes: some Collection<UInt8>) throws(JWKError) {
        let document: JSONObject
        do { document = try JSONParser.parseObject(bytes) } catch { throw JWKError("JWKS is not a JSON object: \(error)") }
        guard let entries = document["keys"]?.arrayValue else { throw JWKError("JWKS has no 'keys' array") }
        var keys: [JWK] = []
        var skipped: [String] = []
        var index: [String: [JWK]] = [:]
        for (position, entry) in entries.enumerated() {
            guard let object = entry.objectValue else {
                skipped.append("keys[\(position)]: not an object")
                continue
            }
            do {
                let key = try JWK(json: object)
                if let id = key.keyID { index[id, default: []].append(key) }
                keys.append(key)
            } catch {
                skipped.append("keys[\(position)]: \(error)")
            }
        }
        guard !keys.isEmpty else { throw JWKError("JWKS holds no usable key (\(skipped.joined(separator: "; ")))") }
        self.keys = keys
        self.skipped = skipped
        self.byID = index
    }

    /// The (first) key with this `kid`, if any.
    public func key(for keyID: String) -> JWK? { byID[keyID]?.first }

    /// Every key with this `kid`, in the set's order.
    public func keys(for keyID: String) -> [JWK] { byID[keyID] ?? [] }

    /// The keys with this `kid` and the issuer they speak for, if there is any.
    public func resolved(_ keyID: String, issuer: String) -> ResolvedKey? {
        ResolvedKey(candidates: keys(for: keyID), issuer: issuer)
    }

    /// The `kid`s in this set, for logs.
    public var keyIDs: [String] { keys.compactMap(\.keyID) }
}
