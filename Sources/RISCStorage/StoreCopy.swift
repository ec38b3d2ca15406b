import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCPostgres
import RISCSQLite

extension Storage {
    /// `risc store copy`: copies the embedded store in `directory` (taking its lock) into this
    /// store, an empty PostgreSQL one, table by table with ids kept, then compares counts and
    /// `sample` SETs row by row. `say`: the report, line by line. A refusal (a locked directory,
    /// a target that is not empty, another token key, a mismatch) is a `StoreError` `refused`.
    public func copy(embeddedStoreIn directory: String, batch: Int, sample: Int, say: (String) -> Void) async throws {
        guard case .shared(let shared) = driver else { throw StoreError(.refused, "the target of a copy is a PostgreSQL store") }
        try SQLiteStore.requireStore(in: directory)
        let lock: DataDirectoryLock
        do { lock = try DataDirectoryLock(directory: directory) } catch { throw StoreError(.refused, "\(error)") }
        defer { lock.release() }
        let journaled = try SQLiteEventStore.journaledNotIndexed(directory: directory)
        guard journaled == 0 else {
            throw StoreError(
                .refused, "\(journaled) acknowledged SETs are in the journal of \(directory), not yet in its store: start risc serve on it once (it indexes them first), stop it, then copy")
        }
        let source = try StoreExport(directory: directory)
        _ = try await shared.migrate()
        let target = PostgresImport(database: shared.database)
        try await target.checkEmpty()
        if let check = try source.tokenKeyCheck() { try await target.adoptTokenKeyCheck(check) }
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
            lines.append(
                "\(table.padding(toLength: 22, withPad: " ", startingAt: 0)) \(String(copied).padding(toLength: 10, withPad: " ", startingAt: 0)) \(found == expected ? "ok" : "MISMATCH: source \(expected), target \(found)")"
            )
            guard found == expected else {
                lines.forEach(say)
                throw StoreError(.refused, "\(table): \(expected) rows in the source, \(found) in the target")
            }
        }
        try await target.resetSequences()
        let top = try source.maxSETID()
        let ids = top == 0 ? [] : (0..<min(Int64(sample), top)).map { 1 + $0 * top / min(Int64(sample), top) }
        let (mine, theirs) = (try source.sample(ids: ids), try await target.sample(ids: ids))
        let differing = mine.filter { theirs[$0.key] != $0.value }.count
        say("TABLE                  ROWS       CHECK")
        lines.forEach(say)
        say("sample of \(mine.count) SETs compared row by row: \(differing == 0 ? "identical" : "\(differing) differ")")
        guard differing == 0 else { throw StoreError(.refused, "\(differing) sampled SETs differ between the source and the target") }
        try MovedMarker.write(in: directory, target: "\(shared.database.url)")
        say("marked \(MovedMarker.path(in: directory)): risc serve refuses this data directory as an embedded store from now on")
        say(
            """
            copied into \(shared.database.url). Next: give every receiver accounts.token_key_file = a copy of \
            \((directory as NSString).appendingPathComponent("token-key")) (or your accounts.token_key_file), and store.url = \(shared.database.url)
            """)
    }

    private static func value(_ cell: StoreCell) -> PostgresImport.Value {
        switch cell {
        case .null: .null
        case .int(let v): .int(v)
        case .double(let v): .double(v)
        case .text(let v): .text(v)
        }
    }
}
