import ArgumentParser
import Foundation
import Logging
import RISCConfig
import RISCCore
import RISCLocal
import RISCServer
import RISCStorage
import RISCTestKit

/// Where a command finds the store: the receiver's config file (`--config`: its `data_dir`,
/// `store.*` and `accounts.token_key_file`), `RISC_*` variables, or flags, flags first. With a
/// `store.url`, the shared PostgreSQL store; otherwise the embedded store in the data directory.
struct StoreOption: ParsableArguments {
    @Option(help: "The receiver's config file (TOML or JSON): its data_dir, store.* and accounts.token_key_file.") var config: String?
    @Option(help: "Data directory (the embedded store; default ./data).") var dataDir: String?
    @Option(help: "A shared PostgreSQL store: postgres://USER@HOST:PORT/DB (default: the embedded store).") var storeURL: String?
    @Option(help: "The token-fingerprint key file, when the receiver's accounts.token_key_file names one.") var tokenKeyFile: String?

    /// The settings after the layers (flags over `RISC_*` over the file), read as `risc serve`
    /// reads them: a command uses the store, the token key and the notices' settings.
    struct Resolved {
        var configuration = ReceiverConfiguration()
        /// Where the data directory comes from, for messages: a flag, a variable, the file, or the default.
        var dataDirectorySource = "the default"

        var dataDirectory: String { configuration.dataDirectory }
        var store: StoreSettings { configuration.store }

        /// The embedded store's database file in the data directory.
        var embeddedStorePath: String { (dataDirectory as NSString).appendingPathComponent("risc.sqlite3") }

        /// Refuses a data directory that holds no embedded store: a command run in the wrong
        /// directory must say so, not make a new empty store and report on that. `creatable`:
        /// the command takes `--create`.
        func requireEmbeddedStore(creatable: Bool) throws {
            guard store.url == nil, !FileManager.default.fileExists(atPath: embeddedStorePath) else { return }
            let directory =
                (dataDirectory as NSString).isAbsolutePath
                ? dataDirectory : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(dataDirectory)
            throw SetupProblem(
                """
                no store in \(directory) (data directory from \(dataDirectorySource); no risc.sqlite3 there): name the \
                receiver's with --config FILE, --data-dir DIR or RISC_DATA_DIR, or a shared one with --store-url\
                \(creatable ? ", or add --create to make a new store there" : "")
                """)
        }

        /// Opens the store (`Storage`, the receiver's factory). `accounts`: the command reads or
        /// writes accounts (needs the token key). A shared store is migrated and checked within
        /// 15 s unless `prepare` is false; a refusal is a usage error.
        func open(accounts: Bool, prepare: Bool = true) async throws -> Storage {
            let storage: Storage
            do {
                storage = try Storage(
                    settings: store, dataDirectory: dataDirectory, tokenKeyFile: configuration.tokenKeyFile, needsTokenKey: accounts,
                    logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
                do {
                    guard prepare else { return storage }
                    // Unstructured: a pool waiting for an unreachable server does not heed cancellation.
                    try await withDeadline(15, "opening the store", clock: systemUptime) { try await storage.prepare() }
                } catch {
                    storage.close()
                    throw error
                }
            } catch let error where StoreError.isRefusal(error) {
                throw SetupProblem("\(error)")
            }
            return storage
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
        var resolved = Resolved(configuration: ReceiverConfiguration(layers: &layers))
        if layers.string("data_dir") != nil {
            resolved.dataDirectorySource = dataDir != nil ? "--data-dir" : layers.source("data_dir") ?? "the configuration"
        }
        guard layers.problems.isEmpty else {
            throw ConfigurationError(problems: layers.problems)
        }
        // As `risc serve` refuses it: an empty one (an unset variable) would be wherever the command runs.
        if resolved.configuration.dataDirectory.isEmpty {
            throw ConfigurationError(problems: ["data_dir must not be empty (data directory from \(resolved.dataDirectorySource))"])
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
        if create != true { try resolved.requireEmbeddedStore(creatable: create != nil) }
        return CommandStore(resolved: resolved, storage: try await resolved.open(accounts: accounts))
    }
}

/// `--create`, for the commands that may make a new embedded store (and only when asked).
struct CreateOption: ParsableArguments {
    @Flag(help: "Make a new embedded store when the data directory holds none (without it, a missing store is an error).")
    var create = false
}

/// A command's store (`Storage`, through the ports), with the settings it was resolved from.
final class CommandStore {
    let resolved: StoreOption.Resolved
    let storage: Storage

    init(resolved: StoreOption.Resolved, storage: Storage) {
        self.resolved = resolved
        self.storage = storage
    }

    var dataDirectory: String { resolved.dataDirectory }
    /// `embedded` or `postgresql`.
    var backendName: String { storage.backendName }
    /// The queue's administration; on a shared store each call within `sharedCallDeadline` seconds
    /// (`DeadlineSession`).
    func queue() throws -> any QueueAdministration { try storage.admin(within: Self.sharedCallDeadline, clock: systemUptime) }
    /// The accounts; on a shared store each call within `sharedCallDeadline` seconds
    /// (`DeadlineAccounts`): a PostgreSQL server gone away in the middle of `risc accounts import`
    /// held it for ever, saying nothing.
    func accounts() throws -> any AccountRepository {
        try storage.accounts(within: Self.sharedCallDeadline, clock: systemUptime)
    }

    /// Seconds one call to a shared store may take from the command line (a transaction of an
    /// import's 20,000 accounts takes about one).
    static let sharedCallDeadline: Double = 60

    /// The accounts, and what queues unlink notices when the configuration turns them on
    /// (`linking.notices.issuer`): revoking or unlinking from the CLI tells Google as the admin API does.
    func accountsAndNotices() throws -> (accounts: any AccountRepository, notices: UnlinkNotices?) {
        (try accounts(), resolved.configuration.unlinkNotices(tokenKey: try storage.tokenKey()))
    }

    func verifications() throws -> any VerificationRequests { try storage.verifications(within: Self.sharedCallDeadline, clock: systemUptime) }
    func close() { storage.close() }

    /// The event-log line of a change the operator made to the accounts from the command line, as
    /// the admin API writes one for the same change (`EventLogRecord.site`, `source: cli`), so `risc
    /// tail` shows who unlinked what: in DATA_DIR/events.log, or beside it in `events.cli.log` while
    /// a receiver writes that file (`commandEventLog`). Nothing where the data directory does not
    /// exist (a shared store used from another machine).
    func recordSite(_ outcome: EventLogRecord.Outcome, subject: String, notices: Bool, fields: JSONObject) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dataDirectory, isDirectory: &isDirectory), isDirectory.boolValue else { return }
        let line = EventLogRecord.site(outcome, source: "cli", subject: subject, notices: notices, time: systemNow(), fields: fields)
        do {
            let log = try commandEventLog(in: dataDirectory, beside: "events.cli.log", who: "risc", what: "this change's line goes to")
            log.record(line)
            log.close()
        } catch {
            FileHandle.standardError.write(Data("risc: the change is made, but its event-log line could not be written: \(error)\n".utf8))
        }
    }
}

/// The event log a command writes in `directory`: its `events.log`, or, while a receiver writes
/// that (one writer a file keeps each chain whole), `beside` next to it, said on standard error
/// (`WHO: the event log … is being written by another risc process; WHAT PATH`).
func commandEventLog(in directory: String, beside: String, who: String, what: String) throws -> JSONLinesEventLog {
    do { return try JSONLinesEventLog(path: (directory as NSString).appendingPathComponent("events.log")) } catch let busy as JSONLinesEventLog.Busy {
        let path = (directory as NSString).appendingPathComponent(beside)
        FileHandle.standardError.write(Data("\(who): \(busy); \(what) \(path)\n".utf8))
        return try JSONLinesEventLog(path: path)
    }
}
