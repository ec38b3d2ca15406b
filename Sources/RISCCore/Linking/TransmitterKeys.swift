import Foundation
import Synchronization

/// The keys risc signs unlink notices with (`linking.notices.key_dir`), in the layout `risc keys`
/// writes: `<kid>.pem` private keys (mode 0600), `jwks.json` (the public keys it publishes, each
/// with `kid` and `alg`) and `active` (the `kid` that signs; without it, the newest key).
///
/// Rotation without a failed notice: `risc keys generate` publishes a new key, which signs nothing
/// yet; once Google has had time to fetch the JWKS again (it is served with a one-hour
/// `max-age`), `risc keys activate` makes it sign; `risc keys retire` stops publishing an old one.
/// `risc keys rotate` does the first two at once. Notices are signed when they are sent, so a
/// notice waiting in the queue is signed with the key active then.
public struct TransmitterKeys: Sendable {
    /// The key that signs, and every published key.
    public let signer: JWSSigner
    /// The public JWK Set served at the issuer's `jwks_uri` (published keys only: no private member).
    public let jwks: JSONValue
    public let keyIDs: [String]

    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
        init(_ directory: String, _ problem: String) { description = "transmitter keys in \(directory): \(problem)" }
    }

    /// Only these sign notices (RFC 8725 §3.1: asymmetric, allow-listed).
    public static let algorithms: Set<JWSAlgorithm> = [.rs256, .ps256, .es256, .eddsa]

    /// Reads the directory. Throws when it has no usable published key, or `active` names a key
    /// that is not published with its private key.
    public init(directory: String) throws {
        let jwksPath = (directory as NSString).appendingPathComponent("jwks.json")
        guard let data = FileManager.default.contents(atPath: jwksPath) else {
            throw LoadError(directory, "no jwks.json (run `risc keys rotate --dir \(directory)`)")
        }
        let document: JSONObject
        do { document = try JSONParser.parseObject(Array(data)) } catch { throw LoadError(directory, "jwks.json is not a JSON object") }
        var published: [JSONValue] = []
        var signers: [String: JWSSigner] = [:]
        var order: [String] = []
        for entry in document["keys"]?.arrayValue ?? [] {
            guard let object = entry.objectValue, let kid = object["kid"]?.stringValue, let alg = object["alg"]?.stringValue,
                Self.algorithms.contains(JWSAlgorithm(rawValue: alg)), Self.isFileName(kid)
            else { throw LoadError(directory, "jwks.json has a key without a usable kid and alg (RS256, PS256, ES256 or EdDSA)") }
            let pemPath = (directory as NSString).appendingPathComponent("\(kid).pem")
            guard let pem = try? String(contentsOfFile: pemPath, encoding: .utf8) else {
                throw LoadError(directory, "no \(kid).pem for published key \(kid)")
            }
            let key: PrivateKey
            do { key = try PrivateKey(pem: pem) } catch { throw LoadError(directory, "\(kid).pem is not a private key OpenSSL can read") }
            let algorithm = JWSAlgorithm(rawValue: alg)
            guard key.publicKey.fits(algorithm) else { throw LoadError(directory, "\(kid).pem does not fit alg \(alg)") }
            if let weakness = key.publicKey.weakness { throw LoadError(directory, "\(kid).pem: \(weakness)") }
            // Publish what the private key says, not what the file claims.
            published.append(.object(key.publicKey.jwk(keyID: kid, algorithm: algorithm)))
            signers[kid] = JWSSigner(key: key, algorithm: algorithm, keyID: kid)
            order.append(kid)
        }
        guard let newest = order.last else { throw LoadError(directory, "jwks.json publishes no key (run `risc keys rotate --dir \(directory)`)") }
        let activePath = (directory as NSString).appendingPathComponent("active")
        let named = (try? String(contentsOfFile: activePath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        let active = named.flatMap { $0.isEmpty ? nil : $0 } ?? newest
        guard let signer = signers[active] else { throw LoadError(directory, "'active' names \(active), which jwks.json does not publish") }
        self.signer = signer
        jwks = .object(["keys": .array(published)])
        keyIDs = order
    }

    /// A `kid` usable as a file name.
    public static func isFileName(_ kid: String) -> Bool {
        !kid.isEmpty && kid.utf8.count <= 128 && !kid.contains("/") && !kid.hasPrefix(".")
            && kid.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }

    /// Makes `kid` (published) the signing key.
    public static func activate(directory: String, keyID kid: String) throws {
        let keys = try TransmitterKeys(directory: directory)
        guard keys.keyIDs.contains(kid) else { throw LoadError(directory, "no published key \(kid)") }
        try PrivateFiles.writeAtomically((directory as NSString).appendingPathComponent("active"), Array((kid + "\n").utf8))
    }

    /// Stops publishing `kid` and deletes its private key. Refuses the signing key.
    public static func retire(directory: String, keyID kid: String) throws {
        let keys = try TransmitterKeys(directory: directory)
        guard keys.keyIDs.contains(kid) else { throw LoadError(directory, "no published key \(kid)") }
        guard keys.signer.keyID != kid else { throw LoadError(directory, "\(kid) is the signing key; activate another first") }
        let jwksPath = (directory as NSString).appendingPathComponent("jwks.json")
        var document = try JSONParser.parseObject(Array(FileManager.default.contents(atPath: jwksPath) ?? Data()))
        document["keys"] = .array((document["keys"]?.arrayValue ?? []).filter { $0.objectValue?["kid"]?.stringValue != kid })
        try PrivateFiles.writeAtomically(jwksPath, Array((JSONValue.object(document).prettyPrinted + "\n").utf8))
        try? FileManager.default.removeItem(atPath: (directory as NSString).appendingPathComponent("\(kid).pem"))
    }
}

/// The transmitter keys as the receiver uses them: read again when `jwks.json` or `active`
/// changes (checked at most once a second), so `risc keys` takes effect without a restart. A
/// directory that became unreadable keeps the last good keys, with the error reported.
public final class TransmitterKeyCache: Sendable {
    public let directory: String
    private struct State {
        var keys: TransmitterKeys?
        var stamp: [Double] = []
        var checkedAt = -Double.infinity
        /// Why the directory's current contents do not load (the last good keys are in use).
        var problem: String?
    }
    private let state = Mutex(State())
    /// Told once when the directory stops loading (with why) and once when it loads again (nil),
    /// so a broken key directory is reported, not only survived.
    private let onProblem: @Sendable (String?) -> Void
    /// Now, in seconds: the directory is looked at again at most once a second by it.
    private let clock: @Sendable () -> Double

    /// Loads the directory now: throws when it has no usable key (a configuration error at start).
    public init(
        directory: String, clock: @escaping @Sendable () -> Double = systemNow, onProblem: @escaping @Sendable (String?) -> Void = { _ in }
    ) throws {
        self.directory = directory
        self.clock = clock
        self.onProblem = onProblem
        let keys = try TransmitterKeys(directory: directory)
        let stamp = stamp()
        state.withLock {
            $0.keys = keys
            $0.stamp = stamp
        }
    }

    private func stamp() -> [Double] {
        ["jwks.json", "active"].flatMap { name -> [Double] in
            let attributes = try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))
            return [(attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0, Double((attributes?[.size] as? Int) ?? -1)]
        }
    }

    /// The current keys.
    public func current() throws -> TransmitterKeys {
        let now = clock()
        let (due, keys) = state.withLock { state -> (Bool, TransmitterKeys?) in
            let due = hasPassed(1, since: state.checkedAt, now: now)
            if due { state.checkedAt = now }
            return (due, state.keys)
        }
        guard due else {
            if let keys { return keys }
            throw TransmitterKeys.LoadError(directory, "no usable key")
        }
        let stamp = stamp()
        if let keys, state.withLock({ $0.stamp }) == stamp { return keys }
        let fresh: TransmitterKeys
        do { fresh = try TransmitterKeys(directory: directory) } catch {
            // Half-written by `risc keys`, or broken: keep signing with the last good keys, and say so once.
            let problem = "\(error)"
            if state.withLock({ state in
                defer { state.problem = problem }; return state.problem != problem
            }) {
                onProblem(problem)
            }
            if let keys { return keys }
            throw error
        }
        let recovered = state.withLock { state in
            defer {
                state.keys = fresh
                state.stamp = stamp
                state.problem = nil
            }
            return state.problem != nil
        }
        if recovered { onProblem(nil) }
        return fresh
    }

    /// Why the directory does not load now (its last good keys are in use), or nil; reads it
    /// again first when it changed (at most once a second).
    public func problem() -> String? {
        _ = try? current()
        return state.withLock { $0.problem }
    }
}
