import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCServer
import RISCStorage

extension RiscCommand {
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The store itself: its status, migrate its schema, copy the embedded store into PostgreSQL.",
            subcommands: [Status.self, Migrate.self, Copy.self]
        )
    }
}

extension RiscCommand.Store {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The store's backend, location, schema version against this binary's, queue counts, and who serves it.",
            discussion: "Reads only: the schema is not migrated (an older one is reported as such).")
        @OptionGroup var store: StoreOption

        func run() async throws {
            let resolved = try store.resolved()
            try resolved.requireEmbeddedStore(creatable: false)
            let storage = try await resolved.open(accounts: false, prepare: false)
            defer { storage.close() }
            do {
                print(JSONValue.object(try await storage.status()).prettyPrinted)
            } catch let error where StoreError.isRefusal(error) {
                throw SetupProblem("\(error)")
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the store's schema to this version of risc (receivers also do it when they start; safe while they run).")
        @OptionGroup var store: StoreOption
        @OptionGroup var creation: CreateOption

        func run() async throws {
            let resolved = try store.resolved()
            if !creation.create { try resolved.requireEmbeddedStore(creatable: true) }
            let storage = try await resolved.open(accounts: false, prepare: false)
            defer { storage.close() }
            print(try await storage.migrate())
        }
    }

    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy an embedded store (a data directory) into an empty PostgreSQL store, then verify counts and a sample of rows.",
            discussion: """
                Stop `risc serve` on the data directory first (the copy takes its lock). Ids are kept, so every reference \
                holds. The token-fingerprint key moves with it: give every receiver of the shared store a copy of the data \
                directory's token-key file (or the file its accounts.token_key_file names) as accounts.token_key_file.
                """)
        @Option(help: "The data directory of the embedded store to copy.") var from: String
        @Option(help: "The PostgreSQL store: postgres://USER@HOST:PORT/DB.") var to: String
        @Option(help: "File with the PostgreSQL password.") var passwordFile: String?
        @Option(help: "CA bundle verifying the PostgreSQL server.") var caFile: String?
        @Option(parsing: .unconditional, help: "Rows per INSERT.") var batch: Int = 500
        @Option(parsing: .unconditional, help: "SETs compared row by row after the copy.") var sample: Int = 200

        func validate() throws {
            try OptionRange.atLeast(1, batch, "--batch")
            // Before: a negative sample crashed the verification after the whole copy.
            try OptionRange.atLeast(0, sample, "--sample")
        }

        func run() async throws {
            let url: StoreURL
            do { url = try StoreURL(to) } catch { throw ValidationError(error.description) }
            var settings = StoreSettings(url: url)
            settings.passwordFile = passwordFile
            settings.caFile = caFile
            let target = try Storage(
                settings: settings, dataDirectory: from, tokenKeyFile: nil, needsTokenKey: false,
                logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            defer { target.close() }
            do {
                try await target.copy(
                    embeddedStoreIn: from, batch: batch, sample: sample, callsWithin: CommandStore.sharedCallDeadline, clock: systemUptime
                ) { print($0) }
            } catch let error where StoreError.isRefusal(error) {
                throw SetupProblem("\(error)")
            }
        }
    }
}
