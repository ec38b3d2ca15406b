import Foundation
import Logging
public import RISCCore
import Synchronization

/// The journal (`SETJournal`): opened by the receiver, which holds the data directory, after
/// indexing what a previous run journaled and did not index.
extension SQLiteEventStore {
    /// Where the journal's segments are: `DATA_DIR/journal`.
    public var journalDirectory: String { ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("journal") }

    /// Indexes the records a previous run journaled beyond the index's mark (each gets the
    /// `received` line it would have had, marked `recovered`, and its actions as usual), removes
    /// the old segments, and opens a new one: pushed SETs are journaled from now on. Call after
    /// `enableInlineActions`, before the listeners start. Returns how many records it indexed.
    @discardableResult
    public func openJournal(log: (any EventLog)?, segmentBytes: Int64 = 8 << 20) throws -> Int {
        let directory = journalDirectory
        let mark = try read { try Self.markRead($0) }
        let segments = SETJournal.segments(in: directory)
        var recovered = 0
        for segment in try Self.beyond(mark, in: directory, segments: segments) {
            if segment.torn > 0 {
                logger.notice(
                    "journal segment ends in a record cut short (never acknowledged)",
                    metadata: ["risc.segment": "\(segment.number)", "risc.bytes": "\(segment.torn)"])
            }
            let entries = try segment.records.map { (try SETJournal.decode($0.payload), $0.position) }
            for ((record, _), result) in zip(entries, index(entries)) {
                let (outcome, followUp) = try result.get()
                var line = EventLogRecord(step: .received, outcome: .accepted, time: Date().timeIntervalSince1970)
                Intake.describe(&line, record.claims, jti: record.tokenID, iss: record.claimedIssuer)
                line["recovered"] = true
                if case .duplicate(_, let deliveries) = outcome {
                    line.outcome = .duplicate
                    line["deliveries"] = .number(Double(deliveries))
                }
                log?.record(line)
                log?.record(followUp, metrics: nil)
                recovered += 1
            }
        }
        if recovered > 0 { logger.notice("indexed SETs the last run had journaled", metadata: ["risc.count": "\(recovered)"]) }
        // All of it is in the index, durably (each append above waited for its fsync).
        for number in segments { unlink((directory as NSString).appendingPathComponent(SETJournal.fileName(number))) }
        let journal = try SETJournal(directory: directory, after: max(mark?.segment ?? 0, segments.last ?? 0), segmentBytes: segmentBytes)
        condition.withLock { self.journal = journal }
        return recovered
    }

    /// Hands `entries` to the writer together (in order) and waits until each is stored and synced
    /// (a start waits on it: the writer runs on threads of its own).
    private func index(_ entries: [(SETRecord, SETJournal.Position)]) -> [StoreResult] {
        guard !entries.isEmpty else { return [] }
        let results = Mutex<[StoreResult?]>(Array(repeating: nil, count: entries.count))
        let done = DispatchSemaphore(value: 0)
        condition.lock()
        for (index, (record, position)) in entries.enumerated() {
            pending.append(
                Waiting(record: record, position: position) { result in
                    results.withLock { $0[index] = result }
                    done.signal()
                })
        }
        condition.signal()
        condition.unlock()
        for _ in entries { done.wait() }
        return results.withLock { $0.map { $0! } }
    }

    /// Records in the journal of the store in `directory` beyond its index's mark: acknowledged
    /// SETs the next `risc serve` indexes first (`risc store status`, and `risc store copy` refuses
    /// to copy a store that has any).
    public static func journaledNotIndexed(directory: String) throws -> Int {
        let journal = (directory as NSString).appendingPathComponent("journal")
        let segments = SETJournal.segments(in: journal)
        guard !segments.isEmpty else { return 0 }
        let connection = try SQLiteConnection(path: (directory as NSString).appendingPathComponent("risc.sqlite3"))
        return try beyond(try markRead(connection), in: journal, segments: segments).reduce(0) { $0 + $1.records.count }
    }

    /// The whole records of each of `segments` in `directory` that end after `mark`, and how many
    /// bytes each segment has after its last whole record.
    static func beyond(_ mark: SETJournal.Position?, in directory: String, segments: [Int64]) throws
        -> [(number: Int64, records: [(payload: ArraySlice<UInt8>, position: SETJournal.Position)], torn: Int)]
    {
        try segments.map { number in
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent(SETJournal.fileName(number)))))
            let (records, torn) = SETJournal.records(in: bytes)
            let kept = records.map { ($0.payload, SETJournal.Position(segment: number, offset: $0.end)) }.filter { record in mark.map { record.1 > $0 } ?? true }
            return (number, kept, torn)
        }
    }

    /// The index's journal mark (none before the first journaled SET, or on a store older than it).
    static func markRead(_ connection: SQLiteConnection) throws -> SETJournal.Position? {
        guard try connection.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'journal_mark'") == 1 else { return nil }
        let statement = try connection.prepare("SELECT segment, offset FROM journal_mark WHERE id = 1")
        defer { statement.reset() }
        return try statement.step() ? SETJournal.Position(segment: statement.int(0), offset: statement.int(1)) : nil
    }
}
