import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCPostgres
import RISCTestKit

// The drills' and benchmarks' own stores: they measure a driver, so they name it.

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
        guard let url = resolved.storeURL else { throw ValidationError("no PostgreSQL store named") }
        var settings = SharedStore.Settings(url: url, passwordFile: resolved.passwordFile, caFile: resolved.caFile, tokenKeyFile: resolved.tokenKeyFile)
        settings.acceptUnsafeDurability = resolved.acceptUnsafeDurability
        let store = try SharedStore(settings: settings, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
        do { try await withDeadline(15, "opening the store") { try await store.prepare() } } catch {
            store.close()
            throw StoreError.isRefusal(error) ? ValidationError("\(error)") : error
        }
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
