import ArgumentParser
import Foundation
import Logging
import RISCLocal
import RISCCore
import RISCPostgres
import RISCServer
import RISCSQLite

extension RiscCommand {
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The store itself: migrate its schema, copy the embedded store into PostgreSQL.",
            subcommands: [Migrate.self, Copy.self]
        )
    }
}

extension RiscCommand.Store {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the store's schema to this version of risc (receivers also do it when they start; safe while they run).")
        @OptionGroup var store: StoreOption
        @OptionGroup var creation: CreateOption

        func run() async throws {
            let resolved = try store.resolved()
            guard let url = resolved.storeURL else {
                if !creation.create { try resolved.requireEmbeddedStore(creatable: true) }
                _ = try QueueAdmin(directory: resolved.dataDirectory)  // opening migrates the embedded store
                print("embedded store in \(resolved.dataDirectory): schema current")
                return
            }
            var settings = SharedStore.Settings(url: url, passwordFile: resolved.passwordFile, caFile: resolved.caFile)
            settings.needsTokenKey = false
            let shared = try SharedStore(settings: settings, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            defer { shared.close() }
            let (from, to) = try await shared.database.migrate()
            print(from == to ? "PostgreSQL store \(shared.database.url): schema version \(to), current" : "PostgreSQL store \(shared.database.url): schema version \(from) → \(to)")
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
        @Option(help: "Rows per INSERT.") var batch: Int = 500
        @Option(help: "SETs compared row by row after the copy.") var sample: Int = 200

        func run() async throws {
            let lock: DataDirectoryLock
            do { lock = try DataDirectoryLock(directory: from) } catch { throw ValidationError("\(error)") }
            defer { lock.release() }
            let source = try StoreExport(directory: from)
            var settings = SharedStore.Settings(url: to, passwordFile: passwordFile, caFile: caFile)
            settings.needsTokenKey = false
            let shared = try SharedStore(settings: settings, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            defer { shared.close() }
            try await shared.database.migrate()
            let target = PostgresImport(database: shared.database)
            do {
                try await target.checkEmpty()
                if let check = try source.tokenKeyCheck() { try await target.adoptTokenKeyCheck(check) }
            } catch let error as StoreError where error.code == .refused {
                throw ValidationError(error.description)
            }
            var lines: [String] = []
            for (table, columns) in StoreExport.tables {
                var after: Int64 = 0
                var copied = 0
                let perInsert = max(1, min(batch, 60_000 / columns.count))
                while true {
                    let (rows, last) = try source.rows(table, after: after, limit: perInsert)
                    if rows.isEmpty { break }
                    try await target.insert(table, columns: columns, rows: rows.map { $0.map(Self.value) })
                    copied += rows.count
                    after = last
                }
                let (expected, found) = (try source.count(table), try await target.count(table))
                lines.append("\(table.padded(22)) \(String(copied).padded(10)) \(found == expected ? "ok" : "MISMATCH: source \(expected), target \(found)")")
                guard found == expected else {
                    print(lines.joined(separator: "\n"))
                    throw ValidationError("\(table): \(expected) rows in the source, \(found) in the target")
                }
            }
            try await target.resetSequences()
            let top = try source.maxSETID()
            let ids = top == 0 ? [] : (0..<min(Int64(sample), top)).map { 1 + $0 * top / min(Int64(sample), top) }
            let (mine, theirs) = (try source.sample(ids: ids), try await target.sample(ids: ids))
            let differing = mine.filter { theirs[$0.key] != $0.value }.count
            print("TABLE                  ROWS       CHECK")
            print(lines.joined(separator: "\n"))
            print("sample of \(mine.count) SETs compared row by row: \(differing == 0 ? "identical" : "\(differing) differ")")
            guard differing == 0 else { throw ValidationError("\(differing) sampled SETs differ between the source and the target") }
            print("""
                copied into \(shared.database.url). Next: give every receiver accounts.token_key_file = a copy of \
                \((from as NSString).appendingPathComponent("token-key")) (or your accounts.token_key_file), and store.url = \(shared.database.url)
                """)
        }

        static func value(_ cell: StoreCell) -> PostgresImport.Value {
            switch cell {
            case .null: .null
            case .int(let v): .int(v)
            case .double(let v): .double(v)
            case .text(let v): .text(v)
            }
        }
    }
}
