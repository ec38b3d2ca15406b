import Foundation
import Logging
import RISCClient
import RISCCore
import RISCTestKit
import Synchronization

enum Fixture {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let jwks = String(decoding: keys.jwksData, as: UTF8.self)
    static var logger: Logger {
        var logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        logger.logLevel = .critical
        return logger
    }

    static func configuration(_ issuer: LocalIssuer, persistence: String? = nil) -> JWKSConfiguration {
        var configuration = JWKSConfiguration(discoveryURL: issuer.discoveryURL, persistencePath: persistence)
        configuration.minimumTTL = 60
        configuration.failureRetryInterval = 0
        return configuration
    }

    static func temporaryDirectory() -> URL {
        let url = Scratch.root.appendingPathComponent("risc-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A JWKS holding only a freshly generated RS256 key.
    static func rotatedKeySet(kid: String) throws -> (String, KeyDirectory.Entry) {
        let key = try PrivateKey.generate(.rsa(bits: 2048))
        let jwk = key.publicKey.jwk(keyID: kid, algorithm: .rs256)
        let document = JSONValue.object(["keys": .array([.object(jwk)])]).serialized
        return (document, KeyDirectory.Entry(keyID: kid, algorithm: .rs256, key: key))
    }
}
