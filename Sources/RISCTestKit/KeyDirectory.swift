public import Foundation
public import RISCCore

/// A directory of signing keys as `risc keys generate` writes it: `<kid>.pem` private keys
/// (mode 0600) and `jwks.json`, the public JWK Set with each key's `kid` and `alg`.
public struct KeyDirectory: Sendable {
    public struct Entry: Sendable {
        public let keyID: String
        public let algorithm: JWSAlgorithm
        public let key: PrivateKey
        public var signer: JWSSigner { JWSSigner(key: key, algorithm: algorithm, keyID: keyID) }
        public init(keyID: String, algorithm: JWSAlgorithm, key: PrivateKey) {
            self.keyID = keyID
            self.algorithm = algorithm
            self.key = key
        }
    }

    public let url: URL
    public let entries: [Entry]
    /// The public JWK Set as its file holds it.
    public let jwksData: Data

    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    /// `generate` was asked for a key ID the directory already has.
    public struct KeyExists: Error, CustomStringConvertible {
        public let description: String
    }

    /// Loads every key named in `jwks.json` whose `<kid>.pem` is present.
    public init(url: URL) throws {
        self.url = url
        let jwksURL = url.appendingPathComponent("jwks.json")
        guard let data = FileManager.default.contents(atPath: jwksURL.path) else {
            throw LoadError(description: "no jwks.json in \(url.path)")
        }
        jwksData = data
        let document = try JSONParser.parseObject(Array(data))
        var entries: [Entry] = []
        for key in document["keys"]?.arrayValue ?? [] {
            guard let object = key.objectValue, let kid = object["kid"]?.stringValue,
                let alg = object["alg"]?.stringValue
            else { continue }
            let pemURL = url.appendingPathComponent("\(kid).pem")
            guard let pem = try? String(contentsOf: pemURL, encoding: .utf8) else { continue }
            entries.append(Entry(keyID: kid, algorithm: JWSAlgorithm(rawValue: alg), key: try PrivateKey(pem: pem)))
        }
        guard !entries.isEmpty else { throw LoadError(description: "no usable <kid>.pem keys in \(url.path)") }
        self.entries = entries
    }

    /// The public key set.
    public var jwks: JWKSet { get throws { try JWKSet(json: Array(jwksData)) } }

    /// The first key with this algorithm.
    public func entry(for algorithm: JWSAlgorithm) -> Entry? { entries.first { $0.algorithm == algorithm } }

    public func entry(keyID: String) -> Entry? { entries.first { $0.keyID == keyID } }

    /// Generates a key into `directory`: writes `<kid>.pem` (0600) and adds the public key to
    /// `jwks.json` (created if absent). Returns the entry.
    @discardableResult
    public static func generate(
        into directory: URL, algorithm: JWSAlgorithm, keyID: String? = nil
    ) throws -> Entry {
        let kind: PrivateKey.GenerationKind
        switch algorithm.family {
        case .rsaPKCS1?, .rsaPSS?: kind = .rsa(bits: 2048)
        case .ecdsa(_, let curve, _)?: kind = .ec(curve: curve)
        case .eddsa?: kind = .ed25519
        case nil: throw LoadError(description: "cannot generate a key for \(algorithm)")
        }
        let key = try PrivateKey.generate(kind)
        let kid = keyID ?? "\(algorithm.rawValue.lowercased())-\(UUID().uuidString.prefix(8).lowercased())"
        // A file name and a member of the key set published to Google: nothing a shell, a
        // terminal or a path would read otherwise.
        guard (1...128).contains(kid.utf8.count), !kid.hasPrefix("."),
            kid.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || "._-".utf8.contains($0) })
        else {
            throw LoadError(description: "a key ID is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'")
        }
        // A new directory is 0700 and the key 0600 from its first byte (never written, then chmod-ed).
        try PrivateFiles.makeDirectory(directory.path)
        let pemURL = directory.appendingPathComponent("\(kid).pem")
        let jwksURL = directory.appendingPathComponent("jwks.json")
        var keys: [JSONValue] = []
        if let data = FileManager.default.contents(atPath: jwksURL.path) {
            do { keys = (try JSONParser.parseObject(Array(data)))["keys"]?.arrayValue ?? [] } catch {
                throw LoadError(description: "\(jwksURL.path) is not a JSON key set (\(error)); nothing was written")
            }
        }
        // Never over a key: it may sign (a notice key directory's active key), and whoever
        // verifies it may hold its public key.
        if FileManager.default.fileExists(atPath: pemURL.path) || keys.contains(where: { $0.objectValue?["kid"]?.stringValue == kid }) {
            throw KeyExists(description: "key \(kid) exists in \(directory.path) already: a key is never overwritten; choose another --kid, or retire it first")
        }
        try PrivateFiles.writeAtomically(pemURL.path, Array(try key.pemRepresentation.utf8))
        keys.append(.object(key.publicKey.jwk(keyID: kid, algorithm: algorithm)))
        let document = JSONValue.object(JSONObject(["keys": .array(keys)]))
        try PrivateFiles.writeAtomically(jwksURL.path, Array((document.prettyPrinted + "\n").utf8))
        return Entry(keyID: kid, algorithm: algorithm, key: key)
    }

    /// The repository's committed test keys (`keys/test`), found from this source file's location.
    public static func repositoryTestKeys(filePath: String = #filePath) throws -> KeyDirectory {
        try KeyDirectory(url: repositoryRoot(filePath: filePath).appendingPathComponent("keys/test"))
    }

    /// The repository root, from a source file's path (`Sources/X/File.swift` or `Tests/X/File.swift`).
    public static func repositoryRoot(filePath: String = #filePath) -> URL {
        var url = URL(fileURLWithPath: filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }
}
