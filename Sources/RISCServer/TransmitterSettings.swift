import Foundation
public import RISCClient
public import RISCCore

/// One named transmitter beside Google (`transmitters.NAME.*`): an SSF 1.0 transmitter (Okta,
/// Oracle, SailPoint, Keycloak, …) or another in Google's dialect. Its keys come from its own
/// discovery document (or a pinned JWK Set), its SETs are checked against its own audiences and
/// algorithms, its pushes may be required to carry an `Authorization` value, and it may override
/// rows of the action table.
public struct TransmitterSettings: Sendable {
    public var name: String
    public var dialect: Transmitter.Dialect = .ssf
    /// The issuer its discovery document and SETs name (required).
    public var issuer = ""
    public var issuerAliases: [String] = []
    /// The `aud` values risc accepts from it (required).
    public var audiences: [String] = []
    public var algorithms: [String] = ["RS256"]
    /// Its discovery document; nil: the issuer's well-known one (`ssf-configuration`, or
    /// `risc-configuration` in Google's dialect), inserted between host and path (SSF §6.2.1).
    public var discoveryURL: String?
    /// A pinned JWK Set file instead of discovery.
    public var jwksFile: String?
    /// Its own push path; nil: the shared `events_path`, where it is told apart by `iss`.
    public var path: String?
    /// A file holding the whole `Authorization` header value risc gave it for pushes (`Bearer …`);
    /// nil: pushes carry none.
    public var authorizationFile: String?

    // Stream management (SSF §8), for `risc stream … --transmitter NAME`.
    /// How deliveries come: `push` (to `receiver_url`) or `poll`.
    public var delivery = "push"
    /// The URL the transmitter pushes to: this receiver's public URL and the transmitter's path.
    public var receiverURL: String?
    /// Event types asked for when the stream is created or replaced (short names or URIs); empty: every one risc understands.
    public var eventsRequested: [String] = []
    /// OAuth 2.0 client credentials for the management API (and poll): the token endpoint, the
    /// client id, how it authenticates, and its secret or key file.
    public var tokenEndpoint: String?
    public var clientID: String?
    public var clientAuth = SSFClientCredentials.Method.clientSecretBasic
    public var clientSecretFile: String?
    public var clientKeyFile: String?
    public var scope: String?
    /// A static bearer token for the management API instead of client credentials.
    public var managementTokenFile: String?
    /// A PEM CA bundle that verifies the transmitter's certificates (metadata, keys, token
    /// endpoint, polls) instead of the system's CAs: an organisation's own CA, trusted for it alone.
    public var caFile: String?
    /// With `delivery = "poll"`: the transmitter's poll endpoint (default: the one `risc stream create` recorded).
    public var pollURL: String?
    /// Seconds between polls when the last brought nothing (5 by default); more waiting SETs are polled at once.
    public var pollInterval: Double = 5

    public init(name: String) { self.name = name }

    /// The discovery document's URL, given or derived from the issuer.
    public var discovery: String {
        discoveryURL ?? Self.wellKnown(issuer: issuer, document: dialect == .ssf ? "ssf-configuration" : "risc-configuration")
    }

    /// `https://tr.example.com/issuer1` → `https://tr.example.com/.well-known/ssf-configuration/issuer1`.
    public static func wellKnown(issuer: String, document: String) -> String {
        guard let schemeEnd = issuer.range(of: "://") else { return issuer }
        let afterScheme = issuer[schemeEnd.upperBound...]
        let slash = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        var path = String(afterScheme[slash...])
        if path.hasSuffix("/") { path.removeLast() }
        return String(issuer[..<slash]) + "/.well-known/" + document + path
    }

    public var policy: SETPolicy {
        var policy = SETPolicy(audiences: Set(audiences), algorithms: Set(algorithms.map(JWSAlgorithm.init(rawValue:))), issuerAliases: issuerAliases)
        policy.requiresType = dialect == .ssf
        return policy
    }

    /// Names are what the log, metrics and file names carry: short, plain.
    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 40 && name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x5F }
    }

    /// Problems with this one transmitter's settings, each naming its key.
    func problems(reserved: [String]) -> [String] {
        let key = "transmitters.\(name)"
        var problems: [String] = []
        if !Self.isValidName(name) { problems.append("\(key): a transmitter's name is 1–40 of a-z, 0-9, '-' and '_'") }
        if issuer.isEmpty {
            problems.append("\(key).issuer is required")
        } else if let refusal = URLPolicy().refusal(for: issuer) {
            problems.append("\(key).issuer: \(refusal)")
        }
        problems += policy.problems.map { "\(key).audiences, algorithms: \($0)" }
        problems += issuerAliases.compactMap { SETPolicy.claimProblem("\(key).issuer_aliases", $0) }
        if jwksFile == nil, let refusal = URLPolicy().refusal(for: discovery) { problems.append("\(key).discovery_url: \(refusal)") }
        if !["push", "poll"].contains(delivery) { problems.append("\(key).delivery must be push or poll, got '\(delivery)'") }
        if !(0.1...3_600).contains(pollInterval) { problems.append("\(key).poll_interval must be 0.1–3600 seconds, got \(pollInterval)") }
        if delivery == "poll" && clientID == nil && managementTokenFile == nil {
            problems.append("\(key).delivery poll needs client_id (with token_endpoint) or management_token_file: polls are authenticated")
        }
        for (member, url) in [("receiver_url", receiverURL), ("token_endpoint", tokenEndpoint), ("poll_url", pollURL)] {
            if let url, let refusal = URLPolicy().refusal(for: url) { problems.append("\(key).\(member): \(refusal)") }
        }
        for name in eventsRequested where EventType(name: name) == nil { problems.append("\(key).events_requested: unknown event type '\(name)'") }
        if clientID != nil {
            if tokenEndpoint == nil { problems.append("\(key).client_id needs token_endpoint") }
            if clientAuth == .privateKeyJWT ? clientKeyFile == nil : clientSecretFile == nil {
                problems.append("\(key).client_auth \(clientAuth.rawValue) needs \(clientAuth == .privateKeyJWT ? "client_key_file" : "client_secret_file")")
            }
            if managementTokenFile != nil { problems.append("\(key): client_id and management_token_file are two ways to authenticate; give one") }
        }
        if let path {
            if let problem = ReceiverConfiguration.pathProblem("\(key).path", path) { problems.append(problem) }
            if reserved.contains(path) { problems.append("\(key).path must differ from linking.revocation_path and the notice documents' paths") }
        }
        return problems
    }
}

extension ReceiverConfiguration {
    /// Problems across the transmitters: names, shared paths, Google's own settings.
    var transmitterProblems: [String] {
        var problems: [String] = []
        let reserved =
            [linkingRevocationPath].compactMap { $0 }
            + (noticeIssuer.map { [UnlinkNotices.discoveryURL(issuer: $0), UnlinkNotices.jwksURL(issuer: $0)].map(UnlinkNotices.path(of:)) } ?? [])
        var names: Set<String> = hasGoogle ? ["google"] : []
        var issuersByPath: [String: [String]] = [:]
        if hasGoogle { issuersByPath[eventsPath] = [SETPolicy.issuerScope(issuer ?? DiscoveryDocument.googleIssuer)] }
        for transmitter in transmitters {
            problems += transmitter.problems(reserved: reserved)
            if !names.insert(transmitter.name).inserted {
                problems.append(
                    transmitter.name == "google"
                        ? "transmitters.google: Google is configured by the top-level audiences, issuer and discovery_url; name this transmitter otherwise"
                        : "transmitters: the name '\(transmitter.name)' is used twice")
            }
            let path = transmitter.path ?? eventsPath
            let scope = SETPolicy.issuerScope(transmitter.issuer)
            if issuersByPath[path, default: []].contains(scope) {
                problems.append("transmitters.\(transmitter.name): another transmitter on \(path) has the issuer \(transmitter.issuer); they cannot be told apart")
            }
            issuersByPath[path, default: []].append(scope)
        }
        return problems
    }

    /// Whether Google is a transmitter: always without `transmitters`, and beside them when
    /// `audiences` names our client IDs.
    public var hasGoogle: Bool { transmitters.isEmpty || !audiences.isEmpty }
}

extension TransmitterSettings {
    /// A problem reading one of its files, naming the setting.
    public struct FileError: Error, CustomStringConvertible {
        public let description: String
    }

    /// A file's content, trimmed (a secret or key risc reads by path); `member` names it in the error.
    public static func secret(_ file: String, _ member: String, of name: String) throws -> String {
        let data: [UInt8]
        do { data = try FileContents.readText(file, regularFile: true) } catch { throw FileError(description: "transmitters.\(name).\(member): \(error)") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The `Authorization` values in `authorization_file` (nil without one): one line, or two while
    /// the value is rotated (either is accepted; the last is the new one, which `risc stream`
    /// gives the transmitter). Read at the start, on SIGHUP and by `risc stream`.
    public func pushCredential() throws -> [String]? {
        guard let file = authorizationFile else { return nil }
        let lines = try Self.secret(file, "authorization_file", of: name).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard (1...2).contains(lines.count), lines.allSatisfy({ !$0.isEmpty }) else {
            throw FileError(description: "transmitters.\(name).authorization_file: must hold one non-empty line (the whole Authorization value), or two while it is rotated")
        }
        return lines
    }

    /// How risc authenticates to its management API and poll endpoint: a static bearer token, or
    /// client credentials; nil when neither is configured.
    public func managementAuthorization() throws -> SSFAuthorization? {
        if let file = managementTokenFile { return .bearer(try Self.secret(file, "management_token_file", of: name)) }
        guard let clientID, let tokenEndpoint else { return nil }
        var signer: JWSSigner?
        if let file = clientKeyFile {
            let key: PrivateKey
            do { key = try PrivateKey(pem: try Self.secret(file, "client_key_file", of: name)) } catch let error as FileError { throw error } catch {
                throw FileError(description: "transmitters.\(name).client_key_file: not a private key OpenSSL can read")
            }
            if let weakness = key.publicKey.weakness { throw FileError(description: "transmitters.\(name).client_key_file: \(weakness)") }
            let algorithm: JWSAlgorithm = key.publicKey.fits(.es256) ? .es256 : key.publicKey.fits(.eddsa) ? .eddsa : .rs256
            signer = JWSSigner(key: key, algorithm: algorithm, keyID: nil)
        }
        return .clientCredentials(
            SSFClientCredentials(
                tokenURL: tokenEndpoint, clientID: clientID, method: clientAuth, secret: try clientSecretFile.map { try Self.secret($0, "client_secret_file", of: name) },
                signer: signer, scope: scope ?? "ssf.read ssf.manage"))
    }

    /// Where what risc knows of its stream is kept: `DATA_DIR/streams/NAME.json`.
    public func streamRecordPath(dataDirectory: String) -> String {
        ((dataDirectory as NSString).appendingPathComponent("streams") as NSString).appendingPathComponent("\(name).json")
    }

    /// The poll endpoint: `poll_url`, else the one the transmitter gave when `risc stream create` made the stream.
    public func pollEndpoint(dataDirectory: String) -> String? {
        if let pollURL { return pollURL }
        let record = FileManager.default.contents(atPath: streamRecordPath(dataDirectory: dataDirectory)).flatMap { try? JSONParser.parseObject(Array($0)) }
        return record?["poll_url"]?.stringValue
    }
}
