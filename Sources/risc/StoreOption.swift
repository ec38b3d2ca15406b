import ArgumentParser
import Foundation
import Logging
import RISCLocal
import RISCCore
import RISCPostgres
import RISCServer
import RISCSQLite
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
        guard let url = resolved.storeURL else {
            if create != true { try resolved.requireEmbeddedStore(creatable: create != nil) }
            return CommandStore(resolved: resolved, shared: nil)
        }
        var settings = SharedStore.Settings(
            url: url, passwordFile: resolved.passwordFile, caFile: resolved.caFile, tokenKeyFile: resolved.tokenKeyFile)
        settings.acceptUnsafeDurability = resolved.acceptUnsafeDurability
        settings.needsTokenKey = accounts
        do {
            let shared = try SharedStore(settings: settings, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            // Unstructured: a pool waiting for an unreachable server does not heed cancellation.
            try await withDeadline(15, "opening the store") { try await shared.prepare() }
            return CommandStore(resolved: resolved, shared: shared)
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

/// A command's view of the store, whichever backend, through the ports.
final class CommandStore {
    let resolved: StoreOption.Resolved
    let shared: SharedStore?

    init(resolved: StoreOption.Resolved, shared: SharedStore?) {
        self.resolved = resolved
        self.shared = shared
    }

    var dataDirectory: String { resolved.dataDirectory }
    /// `embedded` or `postgresql`.
    var backendName: String { shared == nil ? "embedded" : "postgresql" }

    func queue() throws -> any QueueAdministration {
        if let shared { return shared.admin }
        return try QueueAdmin(directory: resolved.dataDirectory)
    }

    func accounts() throws -> any AccountRepository {
        try accountsAndNotices().accounts
    }

    /// The accounts, and what queues unlink notices when the configuration turns them on
    /// (`linking.notices.issuer`): revoking or unlinking from the CLI tells Google as the admin API does.
    func accountsAndNotices() throws -> (accounts: any AccountRepository, notices: UnlinkNotices?) {
        let (accounts, key): (any AccountRepository, [UInt8])
        if let shared {
            (accounts, key) = (shared.accounts, shared.tokenKey)
        } else {
            let store = try AccountStore(directory: resolved.dataDirectory, tokenKeyFile: resolved.tokenKeyFile)
            (accounts, key) = (EmbeddedAccountRepository(store: store), store.tokenKey)
        }
        let notices = resolved.noticeIssuer.map {
            UnlinkNotices(issuer: $0, audience: resolved.noticeAudience, tokenType: resolved.noticeTokenType, tokenKey: key)
        }
        return (accounts, notices)
    }

    func verifications() throws -> any VerificationRequests {
        if let shared { return shared.verifications }
        return try VerificationLedger(directory: resolved.dataDirectory)
    }

    func close() { shared?.close() }
}

/// Where a drill or a benchmark that fills a store of its own runs: the embedded store in a
/// temporary directory by default; `--store-url throwaway`, a PostgreSQL cluster started for the
/// run; or a database named by `--store-url` or by `--config`'s `store.*`, which must hold no SETs
/// (it is filled with test data).
struct ScratchStoreOption: ParsableArguments {
    @Option(help: "Run on PostgreSQL: `throwaway` (a local cluster started for the run) or postgres://USER@HOST:PORT/DB of an empty database (default: the embedded store in a temporary directory).")
    var storeURL: String?
    @Option(help: "A receiver's config file (TOML or JSON): run on the PostgreSQL database its store.* settings name (it must hold no SETs).")
    var config: String?

    /// Whether the run is on PostgreSQL (a configuration that cannot be read is an error, not the
    /// embedded store).
    func isShared() throws -> Bool { try storeURL != nil || resolved().storeURL != nil }

    func resolved() throws -> StoreOption.Resolved {
        try StoreOption.resolve(config: config, dataDir: nil, storeURL: storeURL == "throwaway" ? nil : storeURL, tokenKeyFile: nil)
    }

    /// Opens the PostgreSQL store to run on, nil for the embedded one. `work`: a directory for the
    /// token key when the settings name none.
    func open(work: URL) async throws -> ScratchStore? {
        if storeURL == "throwaway" {
            guard PostgresCluster.isAvailable else { throw ValidationError("PostgreSQL is not installed (scripts/bootstrap --tests installs it)") }
            let cluster = try PostgresCluster()
            do {
                var resolved = StoreOption.Resolved()
                resolved.storeURL = cluster.url
                return try await ScratchStore(resolved: resolved, cluster: cluster, work: work)
            } catch {
                try? cluster.stop()
                throw error
            }
        }
        let resolved = try resolved()
        guard resolved.storeURL != nil else { return nil }
        return try await ScratchStore(resolved: resolved, cluster: nil, work: work)
    }
}

/// A PostgreSQL store a drill or benchmark fills (see `ScratchStoreOption`).
final class ScratchStore {
    let cluster: PostgresCluster?
    let store: SharedStore
    let resolved: StoreOption.Resolved

    init(resolved: StoreOption.Resolved, cluster: PostgresCluster?, work: URL) async throws {
        var resolved = resolved
        if resolved.tokenKeyFile == nil {
            let keyFile = work.appendingPathComponent("token-key")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            _ = try TokenKey.create(at: keyFile.path)
            resolved.tokenKeyFile = keyFile.path
        }
        let opened = try await StoreOption.open(resolved, accounts: true)
        guard let store = opened.shared else { throw ValidationError("no PostgreSQL store named") }
        guard try await store.admin.audit(acknowledged: []).rows == 0 else {
            store.close()
            throw ValidationError("the database already holds SETs: a drill or benchmark fills it with test data, so give it an empty database of its own")
        }
        self.cluster = cluster
        self.store = store
        self.resolved = resolved
    }

    /// `risc serve` arguments that put a receiver on this store.
    var serveArguments: [String] {
        var arguments = ["--store-url", resolved.storeURL ?? "", "--set", "accounts.token_key_file=\(resolved.tokenKeyFile ?? "")"]
        if let file = resolved.passwordFile { arguments += ["--set", "store.password_file=\(file)"] }
        if let file = resolved.caFile { arguments += ["--set", "store.ca_file=\(file)"] }
        if resolved.acceptUnsafeDurability { arguments += ["--set", "store.accept_unsafe_durability=true"] }
        return arguments
    }

    func close() {
        store.close()
        try? cluster?.stop()
    }
}
