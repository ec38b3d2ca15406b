import Foundation
import Logging
import RISCCore
import RISCTestKit
import Synchronization
import Testing

@testable import RISCSQLite

/// The embedded store's journal (issue 30): pushed SETs are durable in it before their 202, and
/// SQLite is filled behind; a start indexes what a previous run left in it.
@Suite("SET journal")
struct SETJournalTests {
    static func records(_ count: Int, prefix: String = "j") async throws -> [SETRecord] {
        try await (0..<count).asyncMap { try await SQLiteEventStoreTests.record(jti: "\(prefix)\($0)") }
    }

    /// Journals `records` through `store` as the push endpoint does (one pass of an "event loop",
    /// a serial queue here, which runs the flush and gets the answers), returning once each is
    /// durable, and each indexed result when it comes.
    static func journal(_ records: [SETRecord], into store: SQLiteEventStore) async throws -> Indexed {
        let loop = DispatchQueue(label: "journal-test-loop")
        let indexed = Indexed()
        let durable = Mutex<[Result<Void, StoreError>]>([])
        let paused = DispatchSemaphore(value: 0)
        loop.async { paused.wait() }  // the loop reads the whole pass before its flush runs
        for record in records {
            let taken = store.journal(
                record, hop: { work in loop.async(execute: work) }, durable: { result in durable.withLock { $0.append(result) } },
                indexed: { result in indexed.results.withLock { $0.append(result) } })
            #expect(taken)
        }
        paused.signal()
        #expect(await waitWhile { durable.withLock { $0.count } < records.count })
        for result in durable.withLock({ $0 }) { try result.get() }
        return indexed
    }

    /// A store in a new directory, on `clock`, its journal open.
    static func journaledStore(clock: TestClock) throws -> SQLiteEventStore {
        let store = try SQLiteEventStore(directory: SQLiteEventStoreTests.directory(), logger: Logger(label: "t"), clock: clock.function)
        try store.openJournal(log: nil)
        return store
    }

    /// A new store's directory and its journal's, the store closed (its journal empty).
    static func emptyJournal() throws -> (directory: String, journal: String) {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        try store.openJournal(log: nil)
        store.close()
        return (directory, store.journalDirectory)
    }

    /// The indexed reports of journaled records, as they come.
    final class Indexed: Sendable {
        let results = Mutex<[StoreResult]>([])
        var count: Int { results.withLock { $0.count } }
    }

    @Test("a record reads back as written; the end cut short is torn, a damaged record before whole ones is skipped, zeros are no record")
    func recordFormat() async throws {
        let records = try await Self.records(3)
        let bytes = records.flatMap(SETJournal.frame)
        let whole = SETJournal.records(in: bytes)
        #expect(whole.records.count == 3 && whole.torn == 0)
        let back = try SETJournal.decode(whole.records[1].payload)
        #expect(back.tokenID == "j1" && back.token == records[1].token && back.issuer == records[1].issuer)
        #expect(back.receivedAt == records[1].receivedAt && back.eventTypes == records[1].eventTypes && back.subjectsJSON == records[1].subjectsJSON)
        // Cut inside the last record: two whole records, the rest torn.
        let cut = SETJournal.records(in: Array(bytes.dropLast(5)))
        #expect(cut.records.count == 2 && cut.torn > 0)
        // One bit flipped in the second record's payload: damage done after it was written (records
        // follow it). It alone is unreadable; the third, acknowledged as well, is read past it.
        var flipped = bytes
        flipped[Int(whole.records[0].end) + 20] ^= 0x01
        let damaged = SETJournal.records(in: flipped)
        #expect(damaged.records.map(\.end) == [whole.records[0].end, whole.records[2].end] && damaged.torn == 0)
        #expect(damaged.damaged == [Int(whole.records[0].end)..<Int(whole.records[1].end)])
        // The same in the last record: no whole record after it, so a write cut short (torn), as after a crash.
        var lastFlipped = bytes
        lastFlipped[Int(whole.records[1].end) + 20] ^= 0x01
        let cutLast = SETJournal.records(in: lastFlipped)
        #expect(cutLast.records.count == 2 && cutLast.damaged.isEmpty && cutLast.torn == bytes.count - Int(whole.records[1].end))
        // A zeroed segment's unwritten rest.
        let zeroed = SETJournal.records(in: bytes + [UInt8](repeating: 0, count: 4096))
        #expect(zeroed.records.count == 3 && zeroed.torn == 0)
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)  // the check value of CRC-32/IEEE
        // Eight bytes a step agrees with a byte at a time, at every length and alignment.
        let sample = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
        for start in 0..<9 {
            for end in stride(from: start, through: 300, by: 13) {
                var crc: UInt32 = 0xFFFF_FFFF
                for byte in sample[start..<end] {
                    crc ^= UInt32(byte)
                    for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
                }
                #expect(CRC32.checksum(sample[start..<end]) == ~crc, "bytes \(start)..<\(end)")
            }
        }
    }

    @Test("journaled SETs are answered durable, then indexed with their outcome; a clean close leaves no segment")
    func journaledThenIndexed() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        #expect(store.journal(try await SQLiteEventStoreTests.record(jti: "early"), hop: { $0() }, durable: { _ in }, indexed: { _ in }) == false)
        try store.openJournal(log: nil)
        let records = try await Self.records(20)
        let indexed = try await Self.journal(records + [records[0]], into: store)
        #expect(!SETJournal.segments(in: store.journalDirectory).isEmpty)
        #expect(await waitWhile { !(indexed.count == 21) })
        let outcomes = try indexed.results.withLock { try $0.map { try $0.get().outcome } }
        #expect(outcomes.filter { if case .accepted = $0 { true } else { false } }.count == 20)
        #expect(outcomes.last == .duplicate(id: 1, deliveries: 2))
        #expect(try store.count() == 20)
        store.close()
        #expect(SETJournal.segments(in: store.journalDirectory).isEmpty)
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 0)
    }

    @Test("journaled SETs the writer could not index are tried again a second later on the store's clock, not the wall clock's")
    func indexRetryOnStoreClock() async throws {
        let clock = TestClock()
        let store = try Self.journaledStore(clock: clock)
        let directory = (store.path as NSString).deletingLastPathComponent
        // Every insert fails, as on a full disk, until the trigger goes.
        let other = try SQLiteConnection(path: store.path)
        try other.execute("CREATE TRIGGER full_disk BEFORE INSERT ON sets BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        let indexed = try await Self.journal(try await Self.records(3, prefix: "retry"), into: store)
        #expect(await waitWhile { store.condition.withLock { store.indexFailure } == nil })
        try other.execute("DROP TRIGGER full_disk")
        // More than a second of real time, none on the store's clock: not tried again yet.
        try await Task.sleep(for: .milliseconds(1_500))
        let stored = try store.count()
        #expect(indexed.count == 0 && stored == 0, "tried again by the wall clock")
        clock.advance(SQLiteEventStore.journalRetrySeconds)
        #expect(await waitWhile { indexed.count < 3 })
        let outcomes = try indexed.results.withLock { try $0.map { try $0.get().outcome } }
        #expect(outcomes.allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(store.condition.withLock { store.indexFailure } == nil)
        store.close()
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 0)
    }

    /// Found: `risc accounts import` of a million accounts beside a running receiver (operations.md,
    /// step 9) holds the store's write lock for its one transaction (65 s); the writer's commit
    /// gave up after the 5 s busy timeout, which stopped the journal as if indexing had failed,
    /// and SETs went the ordinary way: 52 of 1,991 pushed meanwhile were answered 503 after 6 s,
    /// 188 connections reset, answers took up to 11 s. The journal holds them durably: a store
    /// locked by another process is waited for, and SETs are still answered from the journal.
    @Test("a store locked by another process past the busy timeout: journaled SETs are still answered from the journal, and indexed once the lock is free")
    func lockedStoreKeepsJournaling() async throws {
        let clock = TestClock()
        let store = try Self.journaledStore(clock: clock)
        defer { store.close() }
        store.writer.busyTimeout(milliseconds: 100)
        let other = try SQLiteConnection(path: store.path)
        try other.execute("BEGIN IMMEDIATE")  // as an import in another process does, for its whole transaction
        let first = try await Self.journal(try await Self.records(3, prefix: "locked"), into: store)
        #expect(await waitWhile { store.condition.withLock { store.indexRetries } == 0 })
        // The writer waits for the lock to be free; the journal still takes SETs (`journal`
        // expects each to be taken) and answers them durable.
        let second = try await Self.journal(try await Self.records(3, prefix: "still"), into: store)
        #expect(first.count == 0 && second.count == 0)
        try other.execute("ROLLBACK")
        clock.advance(SQLiteEventStore.journalRetrySeconds)
        #expect(await waitWhile { first.count + second.count < 6 })
        #expect(try store.count() == 6)
        // A failure of the store's own still stops the journal (answered once stored, or 503).
        try other.execute("CREATE TRIGGER full_disk BEFORE INSERT ON sets BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        _ = try await Self.journal(try await Self.records(1, prefix: "full"), into: store)
        #expect(await waitWhile { store.condition.withLock { store.indexFailure } == nil })
        try other.execute("DROP TRIGGER full_disk")
        clock.advance(SQLiteEventStore.journalRetrySeconds)
        #expect(await waitWhile { store.condition.withLock { store.indexFailure } != nil })
    }

    @Test("journaled SETs gather on the store's clock before the writer indexes them, holding no worker back; enough of them, an ordinary append or a close end the wait at once")
    func indexLingerOnStoreClock() async throws {
        let clock = TestClock()
        let store = try SQLiteEventStore(directory: SQLiteEventStoreTests.directory(), logger: Logger(label: "t"), clock: clock.function)
        defer { store.close() }
        try store.openJournal(log: nil, indexLinger: 5)
        let first = try await Self.journal(try await Self.records(3, prefix: "linger"), into: store)
        // Durable and answered; real time passes, none of the store's: not indexed yet.
        try await Task.sleep(for: .milliseconds(300))
        let stored = try store.count()
        #expect(first.count == 0 && stored == 0, "indexed before the linger ended")
        // They were answered: the action worker, which yields while answers wait on the writer, need not.
        #expect(!store.isBusy, "journaled SETs waiting for the index held the worker back")
        #expect(store.isIndexing)
        clock.advance(5)
        #expect(await waitWhile { first.count < 3 })
        // An ordinary append is answered once committed: it does not wait for a linger, and the
        // journaled records waiting are committed with it.
        let second = try await Self.journal(try await Self.records(2, prefix: "waiting"), into: store)
        try await Task.sleep(for: .milliseconds(100))
        #expect(second.count == 0)
        let ordinary = Task { try await store.appendReporting(try await SQLiteEventStoreTests.record(jti: "ordinary")) }
        #expect(await waitWhile { second.count < 2 })
        _ = try await ordinary.value
        // `indexBatchRows` of them end it at once.
        let many = try await Self.journal(try await Self.records(store.indexBatchRows, prefix: "many"), into: store)
        #expect(await waitWhile { many.count < store.indexBatchRows })
        let all = try store.count()
        #expect(all == 3 + 2 + 1 + store.indexBatchRows)
        // A close indexes what waits.
        let last = try await Self.journal(try await Self.records(2, prefix: "last"), into: store)
        try await Task.sleep(for: .milliseconds(50))
        #expect(last.count == 0)
        store.close()
        #expect(last.count == 2)
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: (store.path as NSString).deletingLastPathComponent) == 0)
    }

    @Test("the writer holds the database's write lock for its transactions only: not while it reports a journaled batch, nor while it waits to retry one")
    func writeLockForTransactionsOnly() async throws {
        let clock = TestClock()
        let store = try Self.journaledStore(clock: clock)
        let directory = (store.path as NSString).deletingLastPathComponent
        let accounts = try AccountStore(directory: directory, tokenKey: [UInt8](repeating: 1, count: 32))
        /// Whether an account write (the admin API's, under the same write lock) gets through
        /// while the writer is held; then the writer is let go (`release`).
        func accountWriteGoesThrough(_ subject: String, then release: () throws -> Void) async throws -> Bool {
            let done = Mutex(false)
            let write = Task {
                _ = try await accounts.link(AccountLink(subject: subject, userID: "u-\(subject)"), now: 1_000)
                done.withLock { $0 = true }
            }
            // A wide bound: with the writer in the way the write never gets through while it waits
            // (the old code), and under the full suite's load the storage pool it runs on may be
            // busy with other suites' work for seconds (10 s was too short with a bench beside it).
            let through = await waitWhile(upTo: 60) { !done.withLock { $0 } }
            try release()
            _ = try await write.value
            return through
        }
        // A report that takes its time (a slow sink behind the event log or the metrics): held until released.
        let loop = DispatchQueue(label: "journal-test-loop")
        let reporting = Mutex(false)
        let held = DispatchSemaphore(value: 0)
        let record = try await SQLiteEventStoreTests.record(jti: "slow-report")
        let taken = store.journal(
            record, hop: { work in loop.async(execute: work) }, durable: { _ in },
            indexed: { _ in
                reporting.withLock { $0 = true }
                held.wait()
            })
        #expect(taken)
        #expect(await waitWhile { !reporting.withLock { $0 } })
        #expect(try await accountWriteGoesThrough("while-reporting") { held.signal() }, "an account write waited for the writer's reports")
        // A batch that cannot be indexed waits a second of the store's clock (not moved here) to be tried again.
        let other = try SQLiteConnection(path: store.path)
        try other.execute("CREATE TRIGGER full_disk BEFORE INSERT ON sets BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        let indexed = try await Self.journal(try await Self.records(1, prefix: "lock"), into: store)
        #expect(await waitWhile { store.condition.withLock { store.indexFailure } == nil })
        #expect(
            try await accountWriteGoesThrough("while-retrying") {
                try other.execute("DROP TRIGGER full_disk")
                clock.advance(SQLiteEventStore.journalRetrySeconds)
            }, "an account write waited for the writer's retry")
        #expect(await waitWhile { indexed.count < 1 })
        #expect(try store.count() == 2)
        store.close()
    }

    @Test("a journal whose fdatasync failed takes no more SETs: they go the ordinary way (answered once stored, or 503)")
    func refusingJournal() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        try store.openJournal(log: nil)
        let record = try await SQLiteEventStoreTests.record(jti: "after-failure")
        // As the sync thread marks it when an fdatasync fails.
        let syncer = try #require(store.condition.withLock { store.journal }?.syncer)
        syncer.condition.withLock { syncer.failure = StoreError(.failed, "injected fdatasync failure") }
        #expect(store.journal(record, hop: { $0() }, durable: { _ in }, indexed: { _ in }) == false)
        guard case .accepted = try await store.append(record) else {
            Issue.record("not stored the ordinary way")
            return
        }
        store.close()
        // Everything journaled before the failure was indexed: nothing is left for the next start.
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 0)
    }

    /// What a kill leaves: records in the journal that the index does not hold (written here by
    /// a journal whose records never reach a writer), some the index holds (by its mark), and a
    /// record cut short at the end.
    @Test("a start indexes the records a previous run journaled beyond the index's mark, once each, and logs them recovered")
    func recovery() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let records = try await Self.records(30)
        // Run 1: the first ten are journaled and indexed (the mark passes them); the segment is kept aside.
        let first = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { first.close() }
        try first.openJournal(log: nil)
        let indexed = try await Self.journal(Array(records[0..<10]), into: first)
        #expect(await waitWhile { !(indexed.count == 10) })
        let journalDirectory = first.journalDirectory
        let kept = try SETJournal.segments(in: journalDirectory).map {
            ($0, try Data(contentsOf: URL(fileURLWithPath: journalDirectory + "/" + SETJournal.fileName($0))))
        }
        first.close()
        // The same segment again with twenty more records that never reached an index, and half a record.
        var bytes = Array(kept.last!.1)
        bytes += records[10...].flatMap(SETJournal.frame)
        bytes += [200, 1, 0, 0, 1, 2, 3]
        try Data(bytes).write(to: URL(fileURLWithPath: journalDirectory + "/" + SETJournal.fileName(kept.last!.0)))
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 20)

        let log = MemoryEventLog()
        let second = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { second.close() }
        #expect(try second.openJournal(log: log) == 20)
        #expect(try second.count() == 30)
        // Each once: the ten the index held were not counted as redeliveries.
        #expect(try second.record(issuer: records[0].issuer, jti: "j0")?.deliveries == 1)
        #expect(try second.record(issuer: records[0].issuer, jti: "j29")?.deliveries == 1)
        let lines = log.records("received")
        #expect(lines.count == 20 && lines.allSatisfy { $0["recovered"] == true && $0["outcome"] == "accepted" })
        #expect(lines.first?["jti"] == "j10")
        // The old segment is gone; a new one, numbered after it, takes the next SETs.
        let now = SETJournal.segments(in: journalDirectory)
        #expect(now.count == 1 && now[0] > kept.last!.0)
        let more = try await Self.journal([records[5]], into: second)
        #expect(await waitWhile { !(more.count == 1) })
        #expect(try more.results.withLock { try $0[0].get().outcome } == .duplicate(id: 6, deliveries: 2))
        second.close()
    }

    @Test("a start indexes every readable record of a segment damaged since it was written, and keeps the segment aside with an error")
    func damagedSegment() async throws {
        let (directory, journalDirectory) = try Self.emptyJournal()
        let records = try await Self.records(6, prefix: "d")
        // Six acknowledged records never indexed (a kill -9), the third damaged since (a bit flipped).
        var bytes = records.flatMap(SETJournal.frame)
        let frames = records.map { SETJournal.frame($0).count }
        let damagedAt = frames[0] + frames[1]
        bytes[damagedAt + 30] ^= 0x40
        // And a whole record (its CRC right) that is no SET record: written by no risc, undecodable.
        let foreign = Array("not a SET record".utf8)
        SETJournal.appendUInt32(UInt32(foreign.count), to: &bytes)
        SETJournal.appendUInt32(CRC32.checksum(foreign), to: &bytes)
        bytes += foreign
        let segment = SETJournal.segments(in: journalDirectory).last.map { $0 + 1 } ?? 1
        try Data(bytes).write(to: URL(fileURLWithPath: journalDirectory + "/" + SETJournal.fileName(segment)))
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 6)

        let log = MemoryEventLog()
        let second = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { second.close() }
        #expect(try second.openJournal(log: log) == 5)
        // The three after the damage are indexed, not dropped with it.
        #expect(try second.count() == 5)
        for jti in ["d0", "d1", "d3", "d4", "d5"] { #expect(try second.record(issuer: records[0].issuer, jti: jti) != nil, "\(jti) not indexed") }
        // The segment is kept as it was, aside; the error says where and what.
        let kept = journalDirectory + "/damaged/" + SETJournal.fileName(segment)
        #expect(FileManager.default.contents(atPath: kept) == Data(bytes))
        #expect(!SETJournal.segments(in: journalDirectory).contains(segment))
        #expect(SQLiteEventStore.damagedJournalSegments(directory: directory) == [SETJournal.fileName(segment)])
        let failed = log.records("received").filter { $0["outcome"] == "failed" }
        #expect(failed.count == 1 && failed.first?["recovered"] == true && failed.first?["damaged_bytes"] == .number(Double(frames[2] + 8 + foreign.count)))
        let said = failed.first?["error"]?.stringValue ?? ""
        #expect(said.contains("\(frames[2]) bytes at offset \(damagedAt), \(8 + foreign.count) bytes at offset \(frames.reduce(0, +))"), "\(said)")
        // The next start finds nothing more to index; new SETs are journaled after it.
        second.close()
        let third = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        #expect(try third.openJournal(log: MemoryEventLog()) == 0)
        #expect(try third.count() == 5)
        third.close()
    }

    @Test("a damaged segment is kept aside before any of it is indexed: when it cannot be, the start stops with nothing indexed, and the next one reports it")
    func damagedKeptAsideFirst() async throws {
        let (directory, journalDirectory) = try Self.emptyJournal()
        let records = try await Self.records(3, prefix: "k")
        var bytes = records.flatMap(SETJournal.frame)
        bytes[SETJournal.frame(records[0]).count + 30] ^= 0x40  // the second record damaged
        try Data(bytes).write(to: URL(fileURLWithPath: journalDirectory + "/" + SETJournal.fileName(7)))
        // Nowhere to keep it: `damaged` is a file.
        _ = FileManager.default.createFile(atPath: journalDirectory + "/damaged", contents: Data("in the way".utf8))
        let blocked = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        #expect(throws: StoreError.self) { try blocked.openJournal(log: MemoryEventLog()) }
        // Nothing indexed (the mark did not pass the damage), the segment where it was.
        #expect(try blocked.count() == 0)
        blocked.close()
        #expect(SETJournal.segments(in: journalDirectory) == [7])
        try FileManager.default.removeItem(atPath: journalDirectory + "/damaged")
        let log = MemoryEventLog()
        let second = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        #expect(try second.openJournal(log: log) == 2)
        #expect(log.records("received").filter { $0["outcome"] == "failed" }.count == 1)
        #expect(SQLiteEventStore.damagedJournalSegments(directory: directory) == [SETJournal.fileName(7)])
        second.close()
    }

    /// Each fdatasync of a segment that grew wrote its size and new blocks too: about twice the
    /// time and CPU of a sync into zeros already on disk (docs/performance.md, 2026-11-29).
    @Test("segments after a start's first are written full of zeros first: records do not grow them, and a start reads each record of one")
    func preSizedSegments() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let size = (80 << 10) + 3  // its zeros in two pieces, the second of 16 KiB and 3 bytes
        let records = try await Self.records(125)
        let first = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { first.close() }
        try first.openJournal(log: nil, segmentBytes: Int64(size))
        let journalDirectory = first.journalDirectory
        func path(_ number: Int64) -> String { journalDirectory + "/" + SETJournal.fileName(number) }
        func bytes(_ number: Int64) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path(number)))) }
        func fileSize(_ number: Int64) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path(number)))?[.size] as? Int) ?? -1 }
        var chunk = 0
        func journalChunk() async throws {
            let indexed = try await Self.journal(Array(records[chunk..<chunk + 4]), into: first)
            #expect(await waitWhile { !(indexed.count == 4) })
            chunk += 4
        }
        // Past half the first segment, its spare (segment 2) is prepared off the writing path:
        // waited for here, so the next records are written after it is ready.
        while chunk < 80 && SETJournal.segments(in: journalDirectory).count < 2 { try await journalChunk() }
        #expect(await waitWhile { fileSize(2) != size }, "segment 2: \(fileSize(2)) bytes")
        while chunk < 120 { try await journalChunk() }
        // The segment the last records went to: past the first, full size, its records whole.
        let written = try SETJournal.segments(in: journalDirectory).last { !SETJournal.records(in: try bytes($0)).records.isEmpty }
        let current = try #require(written)
        var kept = try bytes(current)
        let read = SETJournal.records(in: kept)
        #expect(current > 1 && kept.count == size, "segment \(current): \(kept.count) bytes")
        #expect(read.torn == 0 && read.damaged.isEmpty && read.records.count >= 4)
        first.close()
        // As after a crash: five more records in its zeros that never reached the index.
        let end = Int(read.records.last!.end)
        let more = records[120..<125].flatMap(SETJournal.frame)
        kept.replaceSubrange(end..<end + more.count, with: more)
        try Data(kept).write(to: URL(fileURLWithPath: path(current)))
        #expect(try SQLiteEventStore.journaledNotIndexed(directory: directory) == 5)
        let second = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { second.close() }
        #expect(try second.openJournal(log: nil) == 5)
        #expect(try second.count() == 125)
        second.close()
    }

    @Test("a full segment rotates to the next; the old one goes once the index holds what it has")
    func rotation() async throws {
        let directory = SQLiteEventStoreTests.directory()
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        try store.openJournal(log: nil, segmentBytes: 4096)
        let records = try await Self.records(40)
        for chunk in stride(from: 0, to: 40, by: 4) {
            let indexed = try await Self.journal(Array(records[chunk..<chunk + 4]), into: store)
            #expect(await waitWhile { !(indexed.count == 4) })
        }
        #expect(await waitWhile { !(SETJournal.segments(in: store.journalDirectory).count <= 3) })
        #expect(try store.count() == 40)
        store.close()
        #expect(SETJournal.segments(in: store.journalDirectory).isEmpty)
    }
}
