import ArgumentParser
import Foundation
import Logging
import RISCLocal
import RISCCore
import RISCServer
import RISCTestKit

/// Where a command finds the store: the receiver's config file (`--config`: its `data_dir`,
/// `store.*` and `accounts.token_key_file`), `RISC_*` variables, or flags, flags first. With a
/// `store.url`, the shared PostgreSQL store; otherwise the embedded store in the data directory.
struct StoreOption: ParsableArguments {
    @Option(help: "The receiver's config file (TOML or JSON): its data_dir, store.* and accounts.token_key_file.") var config: String?
    @Option(help: "Data directory (the embedded store; default ./data).") var dataDir: String?
    @Option(help: "A shared PostgreSQL store: postgres://USER@HOST:PORT/DB (default: the embedded store).") var storeURL: String?
    @Option(help: "The token-fingerprint key file, when the receiver's accounts.token_key_file names one.") var tokenKeyFile: String?

    /// The store settings after the layers: flags over `RISC_*` over the file.
    struct Resolved {
        var dataDirectory = "./data"
        /// Where `dataDirectory` comes from, for messages: a flag, a variable, the file, or the default.
        var dataDirectorySource = "the default"
        var storeURL: String?
        var passwordFile: String?
        var caFile: String?
        var tokenKeyFile: String?
        var acceptUnsafeDurability = false
        /// `linking.notices.*`: what an unlink notice says (nil issuer: notices are off).
        var noticeIssuer: String?
        var noticeAudience = UnlinkNotices.defaultAudience
        var noticeTokenType = "refresh_token"

        /// The settings as a receiver's configuration (what the storage factory reads).
        var configuration: ReceiverConfiguration {
            var configuration = ReceiverConfiguration()
            configuration.dataDirectory = dataDirectory
            configuration.storeURL = storeURL
            configuration.storePasswordFile = passwordFile
            configuration.storeCAFile = caFile
            configuration.storeAcceptUnsafeDurability = acceptUnsafeDurability
            configuration.tokenKeyFile = tokenKeyFile
            configuration.noticeIssuer = noticeIssuer
            configuration.noticeAudience = noticeAudience
            configuration.noticeTokenType = noticeTokenType
            return configuration
        }

        /// The embedded store's database file in the data directory.
        var embeddedStorePath: String { (dataDirectory as NSString).appendingPathComponent("risc.sqlite3") }

        /// Refuses a data directory that holds no embedded store: a command run in the wrong
        /// directory must say so, not make a new empty store and report on that. `creatable`:
        /// the command takes `--create`.
        func requireEmbeddedStore(creatable: Bool) throws {
            guard storeURL == nil, !FileManager.default.fileExists(atPath: embeddedStorePath) else { return }
            let directory = (dataDirectory as NSString).isAbsolutePath
                ? dataDirectory : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(dataDirectory)
            throw ValidationError("""
                no store in \(directory) (data directory from \(dataDirectorySource); no risc.sqlite3 there): name the \
                receiver's with --config FILE, --data-dir DIR or RISC_DATA_DIR, or a shared one with --store-url\
                \(creatable ? ", or add --create to make a new store there" : "")
                """)
        }
    }

    func resolved() throws -> Resolved {
        try Self.resolve(config: config, dataDir: dataDir, storeURL: storeURL, tokenKeyFile: tokenKeyFile)
    }

    /// The store flags as configuration keys (the top layer).
    static func flags(dataDir: String?, storeURL: String?, tokenKeyFile: String?) -> [String: JSONValue] {
        var flags: [String: JSONValue] = [:]
        if let dataDir { flags["data_dir"] = .string(dataDir) }
        if let storeURL { flags["store.url"] = .string(storeURL) }
        if let tokenKeyFile { flags["accounts.token_key_file"] = .string(tokenKeyFile) }
        return flags
    }

    static func resolve(config: String?, dataDir: String?, storeURL: String?, tokenKeyFile: String?) throws -> Resolved {
        let flags = flags(dataDir: dataDir, storeURL: storeURL, tokenKeyFile: tokenKeyFile)
        var layers = ConfigLayers(
            filePath: config, environment: ProcessInfo.processInfo.environment, flags: flags,
            knownKeys: Set(ReceiverConfiguration.keys.map(\.key)))
        var resolved = Resolved()
        if let value = layers.string("data_dir") {
            resolved.dataDirectory = value
            resolved.dataDirectorySource = dataDir != nil ? "--data-dir" : layers.source("data_dir") ?? "the configuration"
        }
        resolved.storeURL = layers.string("store.url")
        resolved.passwordFile = layers.string("store.password_file")
        resolved.caFile = layers.string("store.ca_file")
        resolved.tokenKeyFile = layers.string("accounts.token_key_file")
        if let value = layers.bool("store.accept_unsafe_durability") { resolved.acceptUnsafeDurability = value }
        resolved.noticeIssuer = layers.string("linking.notices.issuer")
        if let value = layers.string("linking.notices.audience") { resolved.noticeAudience = value }
        if let value = layers.string("linking.notices.token_type") { resolved.noticeTokenType = value }
        guard layers.problems.isEmpty else {
            throw ValidationError("invalid configuration:\n" + layers.problems.map { "  - \($0)" }.joined(separator: "\n"))
        }
        return resolved
    }

    /// Opens the store. `accounts`: the command reads or writes accounts (needs the token key).
    /// `create`: the command was asked to make a new embedded store (`--create`); otherwise a data
    /// directory without one is an error.
    func open(accounts: Bool = false, create: Bool? = nil) async throws -> CommandStore {
        try await Self.open(try resolved(), accounts: accounts, create: create)
    }

    /// Opens the store `resolved` names (for commands with options of their own). `create`: nil
    /// for a command that never creates a store, else whether it was asked to.
    static func open(_ resolved: Resolved, accounts: Bool = false, create: Bool? = nil) async throws -> CommandStore {
        if resolved.storeURL == nil, create != true { try resolved.requireEmbeddedStore(creatable: create != nil) }
        do {
            let access = try await StoreAccess.open(
                configuration: resolved.configuration, needsTokenKey: accounts, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            return CommandStore(resolved: resolved, access: access)
        } catch let error where StoreError.isRefusal(error) {
            throw ValidationError("\(error)")
        }
    }
}

/// `--create`, for the commands that may make a new embedded store (and only when asked).
struct CreateOption: ParsableArguments {
    @Flag(help: "Make a new embedded store when the data directory holds none (without it, a missing store is an error).")
    var create = false
}

/// A command's view of the store (`StoreAccess`), with the settings it was resolved from.
final class CommandStore {
    let resolved: StoreOption.Resolved
    let access: StoreAccess

    init(resolved: StoreOption.Resolved, access: StoreAccess) {
        self.resolved = resolved
        self.access = access
    }

    var dataDirectory: String { resolved.dataDirectory }
    /// `embedded` or `postgresql`.
    var backendName: String { access.backendName }
    func queue() throws -> any QueueAdministration { try access.admin() }
    func accounts() throws -> any AccountRepository { try access.accounts() }
    func accountsAndNotices() throws -> (accounts: any AccountRepository, notices: UnlinkNotices?) { try access.accountsAndNotices() }
    func verifications() throws -> any VerificationRequests { try access.verifications() }
    func close() { access.close() }
}
