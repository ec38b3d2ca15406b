import CSQLite
import Foundation
import Logging
import RISCCore
import RISCSQL

/// Reads for health, metrics, tests and the CLI: a separate connection; WAL lets it run beside the writer.
extension SQLiteEventStore {

    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        readLock.lock()
        defer { readLock.unlock() }
        return try body(reader)
    }

    /// SETs acknowledged and not yet processed.
    public func queueDepth() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets WHERE state = 'pending'") ?? 0) }
    }

    /// Pending SETs waiting for a retry after a failure.
    public func retrying() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets WHERE state = 'pending' AND attempts > 0") ?? 0) }
    }

    /// Dead letters: SETs whose actions failed every attempt.
    public func deadLetters() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets WHERE state = 'dead'") ?? 0) }
    }

    /// When the oldest SET still waiting for its actions arrived, if any.
    public func oldestPendingReceivedAt() throws -> Double? {
        try read { connection in
            let statement = try connection.prepare("SELECT min(received_at) FROM sets WHERE state = 'pending'")
            defer { statement.reset() }
            guard try statement.step(), !statement.isNull(0) else { return nil }
            return statement.double(0)
        }
    }

    /// Rows in the store.
    public func count() throws -> Int {
        try read { Int(try $0.scalar("SELECT count(*) FROM sets") ?? 0) }
    }

    /// When the newest SET arrived (seconds since the epoch), if any: kept in memory, read from
    /// the newest row at start.
    public func lastReceivedAt() throws -> Double? {
        condition.lock()
        let known = lastReceived
        condition.unlock()
        if let known { return known }
        return try read { connection in
            let statement = try connection.prepare("SELECT last_received_at FROM sets ORDER BY id DESC LIMIT 1")
            guard try statement.step(), !statement.isNull(0) else { return nil }
            return statement.double(0)
        }
    }

    /// One stored SET by issuer scope and jti, for tests and the CLI.
    public func record(issuer: String, jti: String) throws -> StoredSET? {
        try read { connection in
            let statement = try connection.prepare(
                "SELECT id, deliveries, state, event_types, token, remote FROM sets WHERE issuer = ?1 AND jti = ?2")
            try statement.bind([.text(issuer), .text(jti)])
            guard try statement.step() else { return nil }
            return StoredSET(
                id: statement.int(0), deliveries: statement.int(1), state: statement.text(2) ?? "",
                eventTypes: statement.text(3) ?? "", token: statement.text(4) ?? "", remoteAddress: statement.text(5))
        }
    }

    /// Whether a write transaction can be opened right now (readiness).
    public func isWritable() -> Bool {
        guard FileManager.default.isWritableFile(atPath: path) else { return false }
        condition.lock()
        let failed = syncFailure != nil
        condition.unlock()
        if failed { return false }
        return
            (try? read { connection -> Bool in
                try connection.execute("BEGIN IMMEDIATE")
                try connection.execute("ROLLBACK")
                return true
            }) ?? false
    }
}
