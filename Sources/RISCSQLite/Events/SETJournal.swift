import Foundation
package import RISCCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The embedded store's durability point for pushed SETs: an append-only journal in
/// `DATA_DIR/journal/`, written by the event loop that read the requests and fdatasynced by the
/// journal's sync thread (`Syncer`), after which the loop answers 202. SQLite is filled behind it (the store's writer,
/// in large batches, `indexed`), and a segment is removed once SQLite holds all of it durably.
///
/// A record is `length (u32 LE) · CRC-32 of the payload (u32 LE) · payload`. Records are
/// written in one order under one lock and handed to the writer in that order, so the writer's
/// mark (`journal_mark`: the end of the last record it committed) says exactly which records
/// SQLite holds. At the next start, records after the mark are indexed before anything else; a
/// record cut short or failing its CRC ends the segment: its fdatasync never returned, so it was
/// never acknowledged (and nothing after it was: an fdatasync covers every byte written before).
package final class SETJournal: Sendable {
    /// Where a record ends: its segment and the offset just past it.
    struct Position: Comparable, Sendable {
        var segment: Int64
        var offset: Int64
        static func < (a: Position, b: Position) -> Bool { (a.segment, a.offset) < (b.segment, b.offset) }
    }

    /// One open segment file; its descriptor closes when the last batch holding it is synced.
    final class Segment: Sendable {
        let number: Int64
        let descriptor: Int32
        /// Written full of zeros and synced before its first record (`create(…, zeroedBytes:)`): a
        /// record overwrites blocks already on disk, so its fdatasync writes the data and flushes,
        /// with no size or block allocation of the file's to write too.
        let preSized: Bool
        init(number: Int64, descriptor: Int32, preSized: Bool) {
            self.number = number
            self.descriptor = descriptor
            self.preSized = preSized
        }
        deinit { Glibc.close(descriptor) }
    }

    /// A journaled record's two reports: `durable` once its fdatasync returned (on its event
    /// loop: answer now), `indexed` once the writer stored it in SQLite (the log line).
    typealias Durable = @Sendable (Result<Void, StoreError>) -> Void

    private struct Writing {
        var segment: Segment
        var offset: Int64
        /// Segments written before `segment`, not yet removed.
        var older: [Int64]
        /// Set at close, or after the WAL's fsync failed (`refuse`): every later append is refused.
        /// (A failed write refuses only its batch; a failed fdatasync is the `Syncer`'s.)
        var failure: StoreError?
        /// The next segment, created pre-sized (its zeros and directory synced) off the event
        /// loops once this one holds `spareAfter` bytes, so a rotation is a swap. The first
        /// segment of a start grows as it is written (a store opened for a few SETs writes no
        /// megabytes of zeros); it gives way to its spare as soon as that is ready.
        var spare: Segment?
        var preparingSpare = false
    }

    private struct Batch {
        var bytes: [UInt8] = []
        var records: [(record: SETRecord, end: Int, durable: Durable, indexed: @Sendable (StoreResult) -> Void)] = []
    }

    let directory: String
    let segmentBytes: Int64
    /// The bytes a segment holds when its spare is prepared.
    var spareAfter: Int64 { min(segmentBytes / 2, 256 << 10) }
    private let writing: Mutex<Writing>
    /// Each event loop's records of its current pass, by thread.
    private let batches = Mutex<[UInt: Batch]>([:])
    let syncer: Syncer

    /// Opens a new segment numbered after `after` (and after any file already there).
    init(directory: String, after: Int64, segmentBytes: Int64 = 8 << 20) throws(StoreError) {
        self.directory = directory
        self.segmentBytes = segmentBytes
        do { try PrivateFiles.makeDirectory(directory) } catch { throw StoreError(.failed, "\(error)") }
        let existing = Self.segments(in: directory)
        let segment = try Self.create(directory: directory, number: max(after, existing.last ?? 0) + 1)
        writing = Mutex(Writing(segment: segment, offset: 0, older: existing))
        syncer = Syncer()
    }

    static func fileName(_ number: Int64) -> String { String(format: "segment-%012lld", number) }

    /// The segment numbers in `directory`, in order.
    static func segments(in directory: String) -> [Int64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { $0.hasPrefix("segment-") ? Int64($0.dropFirst("segment-".count)) : nil }.sorted()
    }

    /// Creates segment `number` (and syncs its directory); with `zeroedBytes`, writes that many
    /// zeros first and syncs them a mebibyte at a time (a larger write's flush would hold the
    /// current segment's fdatasync behind it).
    ///
    /// An fdatasync after an append writes the file's new size (ext4: its inode, and the blocks
    /// allocated since) besides the data: on this project's VM a 6 KB record's append and sync took
    /// 263–323 µs and 115–127 µs of CPU, the same write into zeros already on disk 122–160 µs and
    /// 53–72 µs.
    private static func create(directory: String, number: Int64, zeroedBytes: Int64 = 0) throws(StoreError) -> Segment {
        let path = (directory as NSString).appendingPathComponent(fileName(number))
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StoreError(.failed, "cannot create the journal segment \(path): \(String(cString: strerror(errno)))") }
        if zeroedBytes > 0 {
            // A mebibyte a call from one 64 KiB buffer of zeros, named sixteen times: a buffer
            // the size of the chunk would add a mebibyte to the resident set while it is written.
            let zeros = [UInt8](repeating: 0, count: 64 << 10)
            var written: Int64 = 0
            while written < zeroedBytes {
                let step = Int(min(zeroedBytes - written, Int64(16 * zeros.count)))
                let count = zeros.withUnsafeBytes { buffer in
                    var vectors = stride(from: 0, to: step, by: buffer.count).map {
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: min(buffer.count, step - $0))
                    }
                    return pwritev(descriptor, &vectors, Int32(vectors.count), off_t(written))
                }
                if count < 0 && errno == EINTR { continue }
                if count > 0 { written += Int64(count) }
                guard count > 0, fdatasync(descriptor) == 0 else {
                    let reason = String(cString: strerror(errno))
                    Glibc.close(descriptor)
                    unlink(path)
                    throw StoreError(.failed, "cannot write the journal segment \(path): \(reason)")
                }
            }
        }
        // The new file's name must be on disk before any record in it is acknowledged.
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if directoryDescriptor >= 0 { Glibc.close(directoryDescriptor) } }
        guard directoryDescriptor >= 0, fsync(directoryDescriptor) == 0 else {
            Glibc.close(descriptor)
            throw StoreError(.failed, "cannot sync the journal directory \(directory): \(String(cString: strerror(errno)))")
        }
        return Segment(number: number, descriptor: descriptor, preSized: zeroedBytes > 0)
    }

    // MARK: Appending

    /// Adds `record` to this event loop's batch; the first of a pass queues the batch's flush
    /// through `hop` (it runs after the loop has read what was ready).
    func append(
        _ record: SETRecord, hop: @escaping Intake.Hop, durable: @escaping Durable, indexed: @escaping @Sendable (StoreResult) -> Void,
        enqueue: @escaping @Sendable ([(SETRecord, Position, @Sendable (StoreResult) -> Void)]) -> StoreError?
    ) {
        let thread = UInt(pthread_self())
        let framed = Self.frame(record)
        let first = batches.withLock { batches in
            var batch = batches.removeValue(forKey: thread) ?? Batch()
            let first = batch.records.isEmpty
            batch.bytes += framed
            batch.records.append((record, batch.bytes.count, durable, indexed))
            batches[thread] = batch
            return first
        }
        if first { hop { self.flush(thread, hop: hop, enqueue: enqueue) } }
    }

    /// Writes the loop's batch and hands its records to the writer (in file order, under the same
    /// lock); the sync thread fdatasyncs and reports each record durable on the loop (`hop`).
    private func flush(
        _ thread: UInt, hop: @escaping Intake.Hop, enqueue: @Sendable ([(SETRecord, Position, @Sendable (StoreResult) -> Void)]) -> StoreError?
    ) {
        guard let batch = batches.withLock({ $0.removeValue(forKey: thread) }) else { return }
        let written: Result<Segment, StoreError> = writing.withLock { state in
            if let failure = state.failure { return .failure(failure) }
            let segment = state.segment, start = state.offset
            var done = 0
            while done < batch.bytes.count {
                let count = batch.bytes[done...].withUnsafeBytes { pwrite(segment.descriptor, $0.baseAddress, $0.count, off_t(start) + off_t(done)) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    let reason = errno == ENOSPC ? "the disk is full" : String(cString: strerror(errno))
                    _ = ftruncate(segment.descriptor, off_t(start))  // a partial record would hide every later one
                    return .failure(StoreError(.failed, "cannot write the journal: \(reason)"))
                }
                done += count
            }
            let handed = batch.records.map { ($0.record, Position(segment: segment.number, offset: start + Int64($0.end)), $0.indexed) }
            if let refused = enqueue(handed) {
                _ = ftruncate(segment.descriptor, off_t(start))
                return .failure(refused)
            }
            state.offset = start + Int64(batch.bytes.count)
            if state.offset >= segmentBytes || (!segment.preSized && state.spare != nil),
                let next = state.spare ?? (try? Self.create(directory: directory, number: segment.number + 1))
            {
                state.older.append(segment.number)
                state.segment = next
                state.offset = 0
                state.spare = nil
            } else if state.offset >= spareAfter && state.spare == nil && !state.preparingSpare {
                state.preparingSpare = true
                let (directory, number, size) = (directory, segment.number + 1, segmentBytes)
                DispatchQueue.global().async {
                    let spare = try? Self.create(directory: directory, number: number, zeroedBytes: size)
                    let kept = self.writing.withLock { state in
                        state.preparingSpare = false
                        guard state.segment.number == number - 1, state.failure == nil else { return false }
                        state.spare = spare
                        return true
                    }
                    // Closed (or rotated without it) meanwhile: not left behind as a segment.
                    if !kept, spare != nil { unlink((directory as NSString).appendingPathComponent(Self.fileName(number))) }
                }
            }
            return .success(segment)
        }
        switch written {
        case .failure(let error):
            for entry in batch.records { entry.durable(.failure(error)) }
        case .success(let segment):
            syncer.add(Syncer.Written(segment: segment, durable: batch.records.map(\.durable), hop: hop))
        }
    }

    /// Fdatasyncs what the event loops wrote, on a thread of its own, so a loop goes on reading and
    /// verifying while its batch is synced (a loop that synced its own batch held every
    /// connection it serves for as long as the sync took); one sync covers every batch written
    /// before it began, and each batch is answered on its loop with one hop.
    final class Syncer: @unchecked Sendable {  // reason: `waiting`, `stopping`, `done` and `failure` under `condition`
        struct Written {
            let segment: Segment
            let durable: [Durable]
            let hop: Intake.Hop
        }
        let condition = NSCondition()
        var waiting: [Written] = []
        var stopping = false
        var done = false
        /// Set once an fdatasync failed: every later batch is answered with it.
        var failure: StoreError?

        init() { OSThread.start(name: "risc.journal") { [self] in run() } }

        var hasFailed: Bool { condition.withLock { failure != nil } }

        func add(_ written: Written) {
            condition.lock()
            let wake = waiting.isEmpty
            waiting.append(written)
            if wake { condition.signal() }
            condition.unlock()
        }

        /// Syncs what waits, then ends the thread.
        func stop() {
            condition.lock()
            stopping = true
            condition.broadcast()
            while !done { condition.wait() }
            condition.unlock()
        }

        private func run() {
            while true {
                condition.lock()
                while waiting.isEmpty && !stopping { condition.wait() }
                if waiting.isEmpty {
                    done = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                let batches = waiting
                waiting = []
                var failure = self.failure
                condition.unlock()
                // Each segment written to once (a batch written before a turn is in the old one).
                var synced: Set<Int64> = []
                for batch in batches where failure == nil && synced.insert(batch.segment.number).inserted {
                    if fdatasync(batch.segment.descriptor) != 0 {
                        failure = StoreError(.failed, "fdatasync of the journal failed (restart to recover): \(String(cString: strerror(errno)))")
                        condition.withLock { self.failure = failure }
                    }
                }
                let result: Result<Void, StoreError> = failure.map { .failure($0) } ?? .success(())
                for batch in batches {
                    let durable = batch.durable
                    batch.hop { for report in durable { report(result) } }
                }
            }
        }
    }

    /// Ends the sync thread once what waits is synced and answered.
    func stop() { syncer.stop() }

    /// Refuses every later append (the store is closing, or its WAL's fsync failed).
    func refuse(_ error: StoreError) { writing.withLock { if $0.failure == nil { $0.failure = error } } }

    /// Whether an fdatasync failed (or the journal closed): SETs then go the ordinary way.
    var isRefusing: Bool { writing.withLock { $0.failure != nil } || syncer.hasFailed }

    /// Whether full segments wait for the index to be synced before they go.
    var hasOlderSegments: Bool { writing.withLock { !$0.older.isEmpty } }

    /// SQLite now holds everything up to `position` durably: the segments before its own go.
    func indexed(upTo position: Position) {
        let removable = writing.withLock { state in
            let gone = state.older.filter { $0 < position.segment }
            state.older.removeAll { $0 < position.segment }
            return gone
        }
        for number in removable { unlink((directory as NSString).appendingPathComponent(Self.fileName(number))) }
    }

    /// At a clean close, with everything indexed: every segment goes.
    func removeAll() {
        let numbers = writing.withLock { $0.older + [$0.segment.number] + ($0.spare.map { [$0.number] } ?? []) }
        for number in numbers { unlink((directory as NSString).appendingPathComponent(Self.fileName(number))) }
        writing.withLock { $0.older = [] }
    }

    // MARK: Records

    static func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    static func appendString(_ text: String?, to bytes: inout [UInt8]) {
        guard let text else { return appendUInt32(UInt32.max, to: &bytes) }
        let utf8 = text.utf8
        appendUInt32(UInt32(utf8.count), to: &bytes)
        bytes += utf8
    }

    static func appendDouble(_ value: Double, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes += $0 }
    }

    /// `record` as it is written to a segment: length, CRC-32 of the payload, payload (`encode`).
    static func frame(_ record: SETRecord) -> [UInt8] {
        // One buffer: the header's eight bytes, filled in once the payload behind them is written.
        var bytes: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0]
        bytes.reserveCapacity(record.token.utf8.count + record.issuer.utf8.count * 2 + record.tokenID.utf8.count + 88)
        encode(record, into: &bytes)
        let length = UInt32(bytes.count - 8), crc = CRC32.checksum(bytes[8...])
        bytes.withUnsafeMutableBytes { header in
            header.storeBytes(of: length.littleEndian, toByteOffset: 0, as: UInt32.self)
            header.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
        }
        return bytes
    }

    /// The record's fields, appended to `bytes`; its claims are read again from the token when it is recovered.
    static func encode(_ record: SETRecord, into bytes: inout [UInt8]) {
        appendString(record.issuer, to: &bytes)
        appendString(record.claimedIssuer, to: &bytes)
        appendString(record.tokenID, to: &bytes)
        appendDouble(record.issuedAt, to: &bytes)
        appendDouble(record.receivedAt, to: &bytes)
        appendString(record.remoteAddress, to: &bytes)
        appendString(record.contentType, to: &bytes)
        appendString(record.token, to: &bytes)
    }

    /// Reads fields back in `encode`'s order.
    struct Reader {
        let bytes: ArraySlice<UInt8>
        var at: Int

        mutating func uint32() throws(StoreError) -> UInt32 {
            guard at + 4 <= bytes.endIndex else { throw StoreError(.failed, "a journal record ends early") }
            defer { at += 4 }
            return bytes[at..<at + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }
        mutating func double() throws(StoreError) -> Double {
            let low = UInt64(try uint32()), high = UInt64(try uint32())
            return Double(bitPattern: high << 32 | low)
        }
        mutating func string() throws(StoreError) -> String? {
            let count = try uint32()
            if count == UInt32.max { return nil }
            guard at + Int(count) <= bytes.endIndex else { throw StoreError(.failed, "a journal record ends early") }
            defer { at += Int(count) }
            return String(decoding: bytes[at..<at + Int(count)], as: UTF8.self)
        }
        mutating func required() throws(StoreError) -> String {
            guard let text = try string() else { throw StoreError(.failed, "a journal record lacks a field") }
            return text
        }
    }

    package static func decode(_ payload: ArraySlice<UInt8>) throws -> SETRecord {
        var reader = Reader(bytes: payload, at: payload.startIndex)
        let issuer = try reader.required(), claimedIssuer = try reader.required(), tokenID = try reader.required()
        let issuedAt = try reader.double(), receivedAt = try reader.double()
        let remote = try reader.string(), contentType = try reader.string(), token = try reader.required()
        return SETRecord(
            issuer: issuer, claimedIssuer: claimedIssuer, tokenID: tokenID, issuedAt: issuedAt, receivedAt: receivedAt, remoteAddress: remote,
            contentType: contentType, token: token, claims: try SecurityEventToken(payload: CompactJWS(token).payload))
    }

    /// The largest record a segment is read for: far above any SET risc takes (`push.max_body_bytes`
    /// is at most 1 MiB), so a damaged length cannot send the reader past it.
    static let maxRecordBytes = 2 << 20

    /// The record at `at` in `bytes` when one is whole there (its length plausible, its CRC right).
    private static func record(at start: Int, in bytes: [UInt8]) -> (payload: ArraySlice<UInt8>, end: Int)? {
        guard start + 8 <= bytes.count else { return nil }
        var header = Reader(bytes: bytes[start..<start + 8], at: start)
        guard let length = try? header.uint32(), let crc = try? header.uint32(), length > 0, length <= maxRecordBytes else { return nil }
        let end = start + 8 + Int(length)
        guard end <= bytes.count, CRC32.checksum(bytes[(start + 8)..<end]) == crc else { return nil }
        return (bytes[(start + 8)..<end], end)
    }

    /// The whole records of segment file `bytes`, each with the offset just past it. After a crash
    /// only the end can be unreadable (a record is acknowledged once it and all before it are
    /// synced): `torn` counts the bytes after the last whole record. Unreadable bytes *followed*
    /// by whole records are damage done after they were written (the disk, a hand): `damaged`
    /// gives their ranges, and the reader goes on from the next whole record rather than drop
    /// every acknowledged record after them.
    package static func records(in bytes: [UInt8]) -> (records: [(payload: ArraySlice<UInt8>, end: Int64)], damaged: [Range<Int>], torn: Int) {
        var records: [(payload: ArraySlice<UInt8>, end: Int64)] = []
        var damaged: [Range<Int>] = []
        var at = 0
        var unreadableFrom: Int?
        // A pre-sized segment's zeros after its last record hold none: not read byte by byte.
        let filled = (bytes.lastIndex { $0 != 0 } ?? -1) + 1
        while at + 8 <= bytes.count && at < filled {
            guard let (payload, end) = record(at: at, in: bytes) else {
                if unreadableFrom == nil { unreadableFrom = at }
                at += 1
                continue
            }
            if let from = unreadableFrom { damaged.append(from..<at) }
            unreadableFrom = nil
            records.append((payload, Int64(end)))
            at = end
        }
        // Zeros after the last record (a file system may leave them after a crash) are no torn record.
        let rest = unreadableFrom ?? at
        return (records, damaged, bytes[rest...].contains { $0 != 0 } ? bytes.count - rest : 0)
    }
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`), eight bytes a step ("slicing-by-8": a byte at a time
/// through a generic sequence was 2 % of the receiver's time under load).
enum CRC32 {
    /// `tables[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
    static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            tables[index] = (0..<8).reduce(UInt32(index)) { crc, _ in crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        for k in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(k - 1) * 256 + index]
                tables[k * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { checksum($0) } }
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.withUnsafeBytes { checksum($0) } }

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        tables.withUnsafeBufferPointer { t in
            var at = 0
            let count = bytes.count
            while at + 8 <= count {
                let low = bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self).littleEndian ^ crc
                let high = bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self).littleEndian
                crc =
                    t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)] ^ t[5 * 256 + Int((low >> 16) & 0xFF)]
                    ^ t[4 * 256 + Int(low >> 24)] ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                at += 8
            }
            while at < count {
                crc = t[Int((crc ^ UInt32(bytes[at])) & 0xFF)] ^ (crc >> 8)
                at += 1
            }
        }
        return ~crc
    }
}
