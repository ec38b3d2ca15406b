import Foundation
import Logging
public import RISCCore
import Synchronization

/// The journal (`SETJournal`): opened by the receiver, which holds the data directory, after
/// indexing what a previous run journaled and did not index.
extension SQLiteEventStore {
    /// Where the journal's segments are: `DATA_DIR/journal`.
    public var journalDirectory: String { (PathText.directory(of: path) as NSString).appendingPathComponent("journal") }

    /// Indexes the records a previous run journaled beyond the index's mark (each gets the
    /// `received` line it would have had, marked `recovered`, and its actions as usual), removes
    /// the old segments, and opens a new one: pushed SETs are journaled from now on. Call after
    /// `enableInlineActions`, before the listeners start. Returns how many records it indexed.
    /// `indexLinger`: seconds on the store's clock that journaled records gather before the
    /// writer indexes them (see `indexLinger`).
    @discardableResult
    public func openJournal(log: (any EventLog)?, segmentBytes: Int64 = 8 << 20, indexLinger: Double = 0) throws -> Int {
        let directory = journalDirectory
        let mark = try read { try Self.markRead($0) }
        let segments = SETJournal.segments(in: directory)
        var recovered = 0
        for var segment in try Self.beyond(mark, in: directory, segments: segments) {
            if segment.torn > 0 {
                logger.notice(
                    "journal segment ends in a record cut short (never acknowledged)",
                    metadata: ["risc.segment": "\(segment.number)", "risc.bytes": "\(segment.torn)"])
            }
            var entries: [(SETRecord, SETJournal.Position)] = []
            for (payload, position) in segment.records {
                do {
                    entries.append((try SETJournal.decode(payload), position))
                } catch {
                    segment.damaged.append((payload.startIndex - 8)..<Int(position.offset))
                }
            }
            // Kept aside before anything of it is indexed: indexing moves the mark past the damage,
            // and a start after a crash here would take damage below the mark for harmless.
            if !segment.damaged.isEmpty { try keepDamaged(segment, log: log) }
            for ((record, _), result) in zip(entries, index(entries)) {
                let (outcome, followUp) = try result.get()
                var line = EventLogRecord(step: .received, outcome: .accepted, time: wallClock())
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
        condition.withLock {
            self.journal = journal
            self.indexLinger = indexLinger
        }
        return recovered
    }

    /// A segment with bytes beyond the index's mark that cannot be read, though records after
    /// them could: SETs acknowledged once and now lost to damage done since. The file is copied to
    /// `journal/damaged/` as it is, durably (the copy outlives the segment, which goes with the
    /// others once what could be read is indexed), and an error says where, on the diagnostic log
    /// and as a `received` line with outcome `failed`.
    private func keepDamaged(_ segment: JournalSegment, log: (any EventLog)?) throws {
        let aside = Self.damagedDirectory(journal: journalDirectory)
        let destination = (aside as NSString).appendingPathComponent(SETJournal.fileName(segment.number))
        do {
            try PrivateFiles.makeDirectory(aside)
            try PrivateFiles.writeAtomically(destination, segment.bytes)
        } catch {
            throw StoreError(.failed, "journal segment \(segment.number) has damaged records and cannot be kept aside in \(aside): \(error)")
        }
        let ranges = segment.damaged.map { "\($0.count) bytes at offset \($0.lowerBound)" }.joined(separator: ", ")
        logger.error(
            "journal segment has damaged records: the SETs in them were acknowledged and cannot be indexed; the file is kept aside",
            metadata: ["risc.segment": "\(segment.number)", "risc.damaged": "\(ranges)", "risc.kept": "\(destination)"])
        var line = EventLogRecord(step: .received, outcome: .failed, time: wallClock())
        line["recovered"] = true
        line["error"] = .string("journal segment \(segment.number): \(ranges) cannot be read (damaged since written); kept in \(destination)")
        line["damaged_bytes"] = .number(Double(segment.damaged.reduce(0) { $0 + $1.count }))
        log?.record(line)
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
        let path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        let mark: SETJournal.Position?
        do { mark = try markRead(try SQLiteConnection(path: path)) } catch let error as StoreError { throw error.opening(path) } catch { throw error }
        return try beyond(mark, in: journal, segments: segments).reduce(0) { $0 + $1.records.count }
    }

    /// The segments a start kept aside in `journal/damaged/` (records in them could not be read), by name.
    public static func damagedJournalSegments(directory: String) -> [String] {
        let aside = damagedDirectory(journal: (directory as NSString).appendingPathComponent("journal"))
        return ((try? FileManager.default.contentsOfDirectory(atPath: aside)) ?? []).filter { $0.hasPrefix("segment-") }.sorted()
    }

    /// Where damaged segments are kept: `journal/damaged/`.
    static func damagedDirectory(journal: String) -> String { (journal as NSString).appendingPathComponent("damaged") }

    /// The whole records of each of `segments` in `directory` that end after `mark`, and how many
    /// bytes each segment has after its last whole record.
    static func beyond(_ mark: SETJournal.Position?, in directory: String, segments: [Int64]) throws -> [JournalSegment] {
        try segments.map { number in
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent(SETJournal.fileName(number)))))
            let (records, damaged, torn) = SETJournal.records(in: bytes)
            // What the index holds was stored from memory when it was written: damage there loses nothing.
            func beyondMark(_ end: Int) -> Bool { mark.map { SETJournal.Position(segment: number, offset: Int64(end)) > $0 } ?? true }
            let kept = records.map { ($0.payload, SETJournal.Position(segment: number, offset: $0.end)) }.filter { beyondMark(Int($0.1.offset)) }
            return JournalSegment(number: number, bytes: bytes, records: kept, damaged: damaged.filter { beyondMark($0.upperBound) }, torn: torn)
        }
    }

    /// One segment's records beyond the index's mark, and what of it cannot be read.
    struct JournalSegment {
        let number: Int64
        /// The file as it was read (kept aside as it is when damaged).
        let bytes: [UInt8]
        let records: [(payload: ArraySlice<UInt8>, position: SETJournal.Position)]
        /// Byte ranges beyond the mark that no record can be read from, followed by records that can.
        var damaged: [Range<Int>]
        /// Bytes after the last whole record: a write a crash cut short, never acknowledged.
        let torn: Int
    }

    /// The index's journal mark (none before the first journaled SET, or on a store older than it).
    static func markRead(_ connection: SQLiteConnection) throws -> SETJournal.Position? {
        guard try connection.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'journal_mark'") == 1 else { return nil }
        let statement = try connection.prepare("SELECT segment, offset FROM journal_mark WHERE id = 1")
        defer { statement.reset() }
        return try statement.step() ? SETJournal.Position(segment: statement.int(0), offset: statement.int(1)) : nil
    }
}
