import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCServer
import RISCStorage
import RISCTestKit

/// Where a drill or a benchmark that fills a store of its own runs: the embedded store in a
/// temporary directory by default; `--store-url throwaway`, a PostgreSQL cluster started for the
/// run; or a database named by `--store-url` or by `--config`'s `store.*`, which must hold no SETs
/// (it is filled with test data).
struct ScratchStoreOption: ParsableArguments {
    @Option(help: "Run on PostgreSQL: `throwaway` (a local cluster started for the run) or postgres://USER@HOST:PORT/DB of an empty database (default: the embedded store in a temporary directory).")
    var storeURL: String?
    @Option(help: "A receiver's config file (TOML or JSON): run on the PostgreSQL database its store.* settings name (it must hold no SETs).")
    var config: String?

    /// Opens the store to fill: the embedded one in `data` (made), or the PostgreSQL one named;
    /// `work`: a directory for the token key when the settings name none.
    func open(data: String, work: URL) async throws -> ScratchStore {
        var resolved = try StoreOption.resolve(config: config, dataDir: data, storeURL: storeURL == "throwaway" ? nil : storeURL, tokenKeyFile: nil)
        guard storeURL == "throwaway" else { return try await ScratchStore(resolved: resolved, cluster: nil, work: work) }
        guard PostgresCluster.isAvailable else { throw ValidationError("PostgreSQL is not installed (scripts/bootstrap --tests installs it)") }
        let cluster = try await PostgresCluster.make()
        do {
            resolved.configuration.store.url = try StoreURL(cluster.url)
            return try await ScratchStore(resolved: resolved, cluster: cluster, work: work)
        } catch {
            try? await cluster.stop()
            throw error
        }
    }
}

/// The store a drill or benchmark fills (see `ScratchStoreOption`).
final class ScratchStore {
    let cluster: PostgresCluster?
    let storage: Storage
    let resolved: StoreOption.Resolved

    init(resolved: StoreOption.Resolved, cluster: PostgresCluster?, work: URL) async throws {
        var resolved = resolved
        if resolved.store.url == nil {
            // A temporary store of its own, with a key of its own: never the configuration's key file.
            resolved.configuration.tokenKeyFile = nil
            try PrivateFiles.makeDirectory(resolved.dataDirectory)
        } else if resolved.configuration.tokenKeyFile == nil {
            let keyFile = work.appendingPathComponent("token-key")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            _ = try TokenKey.create(at: keyFile.path)
            resolved.configuration.tokenKeyFile = keyFile.path
        }
        let storage = try await resolved.open(accounts: true)
        // A fresh temporary directory is empty; a database named for the run must be.
        if resolved.store.url != nil, try await storage.admin().audit(acknowledged: []).rows != 0 {
            storage.close()
            throw ValidationError("the database already holds SETs: a drill or benchmark fills it with test data, so give it an empty database of its own")
        }
        self.cluster = cluster
        self.storage = storage
        self.resolved = resolved
    }

    var isShared: Bool { resolved.store.url != nil }
    /// `embedded store` or `PostgreSQL store`, for reports.
    var name: String { isShared ? "PostgreSQL store" : "embedded store" }

    /// `risc serve` arguments that put a receiver on this store (besides its data directory).
    var serveArguments: [String] {
        guard let url = resolved.store.url else { return [] }
        var arguments = ["--store-url", url.text, "--set", "accounts.token_key_file=\(resolved.configuration.tokenKeyFile ?? "")"]
        if let file = resolved.store.passwordFile { arguments += ["--set", "store.password_file=\(file)"] }
        if let file = resolved.store.caFile { arguments += ["--set", "store.ca_file=\(file)"] }
        if resolved.store.acceptUnsafeDurability { arguments += ["--set", "store.accept_unsafe_durability=true"] }
        return arguments
    }

    func close() {
        storage.close()
        try? cluster?.stopBlocking()
    }
}
