import ArgumentParser
import Foundation
import Logging
import RISCClient
import RISCConfig
import RISCCore

/// Flags that say what a valid SET is and where keys come from.
struct VerificationOptions: ParsableArguments {
    @Option(name: .customLong("audience"), help: "An accepted OAuth client ID (repeat for several). Required.")
    var audiences: [String] = []

    @Option(help: "Expected issuer. With --jwks-file it is the issuer; with discovery, the document must name it.")
    var issuer: String?

    @Option(name: .customLong("issuer-alias"), help: "Another accepted 'iss' value (repeatable).")
    var issuerAliases: [String] = []

    @Option(help: "Use this JWK Set file and fetch nothing (pinned, offline).", transform: OptionRange.path)
    var jwksFile: String?

    @Option(help: "Discovery document URL (issuer and jwks_uri).")
    var discoveryURL: String = DiscoveryDocument.googleURL

    @Option(name: .customLong("algorithm"), help: "An allowed JWS algorithm (repeatable). Default RS256.")
    var algorithms: [String] = []

    @Option(help: "Directory where the last good key set is kept between runs.", transform: OptionRange.path)
    var dataDir: String?

    func validate() throws {
        guard !audiences.isEmpty else { throw ValidationError("give at least one --audience (your OAuth client ID)") }
        var problems = policy.problems
        problems += ((issuer.map { [("--issuer", $0)] } ?? []) + issuerAliases.map { ("--issuer-alias", $0) }).compactMap(SETPolicy.claimProblem)
        guard problems.isEmpty else { throw ValidationError(problems.joined(separator: "; ")) }
        if jwksFile == nil, let refusal = URLPolicy().refusal(for: discoveryURL) {
            throw ValidationError("--discovery-url: \(refusal)")
        }
    }

    var policy: SETPolicy {
        SETPolicy(
            audiences: Set(audiences.flatMap(ConfigLayers.commaList)),  // `--audience a,b` is a list, as for serve
            algorithms: algorithms.isEmpty ? JWSAlgorithm.defaultAllowed : Set(algorithms.map(JWSAlgorithm.init(rawValue:))),
            issuerAliases: issuerAliases)
    }

    /// A pinned key set from `--jwks-file`, or a cache over the discovery document.
    func keyProvider(logger: Logger) throws -> any KeyProvider {
        if let jwksFile {
            return StaticKeyProvider(keys: try readJWKSet(jwksFile), issuer: issuer ?? DiscoveryDocument.googleIssuer)
        }
        var configuration = JWKSConfiguration(discoveryURL: discoveryURL, expectedIssuer: issuer)
        if let dataDir {
            try PrivateFiles.makeDirectory(dataDir)
            configuration.persistencePath = (dataDir as NSString).appendingPathComponent("jwks-cache.json")
        }
        return JWKSCache(configuration: configuration, logger: logger)
    }
}
