import Foundation
public import RISCCore

#if canImport(Glibc)
import Glibc
#endif

/// The event log as a file of JSON lines (and optionally standard output).
///
/// `record` appends to an in-memory buffer and returns; a flusher thread writes the buffer out
/// every `flushInterval` or as soon as it passes `flushBytes`. `reopen()` (on SIGHUP) closes and
/// reopens the file, so `logrotate` can move it away. Records are never dropped: if the file
/// cannot be written or opened again, lines wait in the buffer and the flusher tries again every
/// `flushInterval` (bounded by `maxBufferedBytes`, past which new lines are counted in `dropped`
/// and a warning line is written when there is room again).
///
/// Every line is chained (`EventLogChain`): sealed with its `seq` and `prev` as it is appended, in
/// the order it is written, so the chain costs a hash and no extra write. A log that exists goes
/// on from its last line (or, when logrotate just moved it, from the newest rotated file's); a
/// torn last line (a write cut off) is ended and named by the next line; a new log starts with
/// its genesis line.
public final class JSONLinesEventLog: EventLog, Sendable {
    private let core: Core
    public var path: String? { core.path }
    /// The checkpoints' origin line: `risc-event-log/<log_id>`.
    public var origin: String { core.origin }

    /// Where and how often the chain is checkpointed (issue 28): a C2SP signed note of the tree of
    /// every line so far, made at least every `interval` seconds (by the log's clock) and at the
    /// close, written to `DIRECTORY/events.checkpoint` and given to `publish` (off the box).
    public struct Checkpoints: Sendable {
        public var key: CheckpointKey
        public var interval: Double
        public var publish: @Sendable (String) -> Void

        public init(key: CheckpointKey, interval: Double = 60, publish: @escaping @Sendable (String) -> Void = { _ in }) {
            (self.key, self.interval, self.publish) = (key, interval, publish)
        }
    }

    /// The file that holds the newest checkpoint of the log at `path`.
    public static func checkpointPath(of path: String) -> String {
        (PathText.directory(of: path) as NSString).appendingPathComponent("events.checkpoint")
    }

    /// `logID`: the genesis line's name for this log (the node's; default the host name).
    public init(
        path: String?, toStandardOutput: Bool = false, flushInterval: Double = 0.02, logID: String? = nil, chained: Bool = true,
        checkpoints: Checkpoints? = nil, segments: EventLogSegments.Settings? = nil, lockWait: LockWait = LockWait(),
        clock: @escaping @Sendable () -> Double = systemNow
    ) throws {
        core = try Core(
            path: path, toStandardOutput: toStandardOutput, flushInterval: flushInterval, logID: logID, chained: chained,
            checkpoints: checkpoints, segments: segments, lockWait: lockWait, clock: clock)
    }

    /// A log let go is closed: its lines written, its file and lock given back.
    deinit { core.close() }

    /// The log is written by another process (one writer a file, or its chain would interleave).
    public struct Busy: Error, CustomStringConvertible {
        public let path: String
        public var description: String { "the event log \(path) is being written by another risc process" }
    }

    /// Appends one line to the buffer (the flusher writes it out); never blocks on the file.
    public func record(_ record: EventLogRecord) { core.record(record) }
    /// Closes and reopens the file at `path` (for log rotation).
    public func reopen() { core.reopen() }
    /// Flushes and stops. Idempotent.
    public func close() { core.close() }
    /// Returns once the flusher has written every line recorded before the call (see `Core.settle`).
    public func settle() { core.settle() }
}

extension JSONLinesEventLog {
    /// The log's state and its flusher. The flusher's thread holds this, not the log, so that a
    /// log let go without `close()` is closed by its `deinit` (the thread held the log unowned, and
    /// a log let go before the thread's first read of it crashed the process).
    final class Core: @unchecked Sendable {  // reason: every mutable field is read and written under `condition`
        let path: String?
        private let toStandardOutput: Bool
        private let condition = NSCondition()
        private var buffer: [UInt8] = []
        private var fd: Int32 = -1
        private var stopping = false
        private var finished = false
        private var reopenRequested = false
        /// Where in `buffer` the reopen asked for falls: the lines before it go to the file as it
        /// was, those after it (SIGHUP's own reload line among them) to the one opened again.
        private var reopenAt = 0
        private var dropped = 0
        /// The last pass could not write all it took (the rest went back to the buffer's front).
        private var failing = false
        /// The file ends inside a line (a write cut short): the rest goes to it before any reopen.
        private var midLine = false
        private let flushInterval: Double
        private let lockWait: LockWait
        private let flushBytes = 256 * 1024
        private let maxBufferedBytes = 64 * 1024 * 1024
        /// Where the chain stands; nil: lines are not chained (`risc bench log`'s comparison only).
        private var chain: EventLogChain?
        /// Signed checkpoints of the chain (nil: none are made).
        private let checkpoints: JSONLinesEventLog.Checkpoints?
        /// The Merkle tree of every line from the genesis, while checkpoints are made.
        private var range: MerkleRange?
        private var lastCheckpoint = -Double.infinity
        /// The checkpoints' origin line: `risc-event-log/<log_id>`.
        let origin: String
        private let logID: String
        /// risc's own rotation into segments with digests (nil: the file is only reopened on SIGHUP,
        /// for logrotate).
        private let segments: EventLogSegments.Settings?
        /// The log's one clock (the receiver's): the times of its own lines (its genesis, what it could
        /// not do at open, lines dropped, rotations), when checkpoints are due and segments turn, and
        /// the `closed` time of their digests.
        private let clock: @Sendable () -> Double
        /// Bytes in the file being written, and when it began (the previous segment's closing, or the start).
        private var segmentBytes: Int64 = 0
        private var segmentStarted: Double = 0
        /// `settle()`'s requests, and the flusher's passes that answered them.
        private var passesAsked = 0
        private var passesDone = 0

        /// As `JSONLinesEventLog.init`, which gives the defaults.
        init(
            path: String?, toStandardOutput: Bool, flushInterval: Double, logID: String?, chained: Bool,
            checkpoints: JSONLinesEventLog.Checkpoints?, segments: EventLogSegments.Settings?, lockWait: LockWait,
            clock: @escaping @Sendable () -> Double
        ) throws {
            self.clock = clock
            let logID = logID ?? ProcessInfo.processInfo.hostName
            self.logID = logID
            self.origin = "risc-event-log/" + logID
            self.segments = path == nil || !chained || segments?.rotates != true ? nil : segments
            self.checkpoints = path == nil || !chained ? nil : checkpoints
            self.path = path
            self.toStandardOutput = toStandardOutput
            self.flushInterval = flushInterval
            self.lockWait = lockWait
            if let path {
                fd = Self.open(path, wait: lockWait)
                guard fd >= 0 else {
                    finished = true  // no flush thread to wait for: close() returns at once
                    if errno == EWOULDBLOCK { throw JSONLinesEventLog.Busy(path: path) }
                    throw POSIXError(.init(rawValue: errno) ?? .EIO)
                }
                if let segments = self.segments {
                    _ = try? EventLogSegments.recover(path, logID: logID, settings: segments, now: clock())  // a rotation a crash cut off
                    var status = stat()
                    segmentBytes = fstat(fd, &status) == 0 ? Int64(status.st_size) : 0
                    segmentStarted = (try? EventLogSegments.newestDigest(path))?.map(\.digest.closed) ?? clock()
                }
            }
            let tail: EventLogChain.Tail?
            do {
                tail = try path.flatMap(Self.chainTail)
            } catch {
                Glibc.close(fd)
                finished = true
                throw error
            }
            if chained {
                let now = clock()
                if tail?.inOtherFile != true, tail?.needsNewline == true || (tail?.tornBytes ?? 0) > 0 { buffer.append(0x0A) }
                if let resumed = tail?.chain {
                    chain = resumed
                    if self.checkpoints != nil, let path {
                        let rebuilt = Self.rebuildRange(path, chain: resumed)
                        range = rebuilt.tree
                        if let problem = rebuilt.problem {
                            var record = EventLogRecord(step: .log, outcome: .failed, time: now)
                            record["error"] = .string("no checkpoints: \(problem)")
                            append(record)
                        }
                    }
                } else {
                    chain = .empty
                    var genesis = EventLogRecord(step: .log, outcome: .genesis, time: now)
                    genesis["log_id"] = .string(logID)
                    if self.checkpoints != nil { range = MerkleRange() }
                    append(genesis)
                }
                if let torn = tail?.tornBytes, torn > 0 {
                    var record = EventLogRecord(step: .log, outcome: .torn, time: now)
                    record["bytes"] = .number(Double(torn))
                    append(record)
                }
            }
            OSThread.start(name: "risc.eventlog") { [self] in flushLoop() }  // held until close() ends the thread
        }

        /// Opens `path` for appending, held by this writer alone (`flock`, a holder of a moment waited
        /// out); -1 with `errno` set if not.
        private static func open(_ path: String, wait: LockWait) -> Int32 {
            let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return -1 }
            guard wait.lock(fd) else {
                let error = errno
                Glibc.close(fd)
                errno = error
                return -1
            }
            return fd
        }

        /// Where the chain of the log at `path` stands: its own last line, or, when it has none
        /// (logrotate just moved it), the newest rotated file's that has one.
        static func chainTail(_ path: String) throws -> EventLogChain.Tail? {
            if let tail = try EventLogChain.tail(of: path), tail.chain != nil || tail.tornBytes > 0 { return tail }
            // Just rotated by risc: the newest segment's digest says where the chain stands.
            if let newest = try EventLogSegments.newestDigest(path) {
                return EventLogChain.Tail(chain: newest.digest.end.chain, tornBytes: 0, needsNewline: false, inOtherFile: true)
            }
            for file in EventLogSegments.logrotateFiles(of: path).reversed() {
                var tail: EventLogChain.Tail?
                if file.hasSuffix(".gz") {
                    let bytes = try EventLogVerifier.contents(of: file)
                    tail = bytes.isEmpty ? nil : EventLogChain.tail(ofWindow: bytes)
                } else {
                    tail = try EventLogChain.tail(of: file)
                }
                // A torn last line there (a kill, then logrotate before the restart) is named by this
                // file's first line; no newline is owed to a file risc no longer writes.
                if var tail, tail.chain != nil {
                    tail.needsNewline = false
                    tail.inOtherFile = true
                    return tail
                }
            }
            return nil
        }

        /// Appends a record to the buffer, sealed; under `condition` or before the flusher starts.
        private func append(_ record: EventLogRecord) {
            let start = buffer.count
            record.write(to: &buffer)
            seal(from: start)
        }

        private func seal(from start: Int) {
            guard chain != nil else { return }
            chain!.seal(&buffer, from: start)
            range?.append(leaf: chain!.last)
        }

        /// The tree of an existing log's lines, read whole from its genesis; nil, and why, when the
        /// log cannot give it (its first files gone, or its chain broken).
        static func rebuildRange(_ path: String, chain: EventLogChain) -> (tree: MerkleRange?, problem: String?) {
            let summary: EventLogVerifier.Summary
            do {
                // From the last checkpoint, in the file being written: only the lines written since are read.
                if let tree = EventLogResume.tree(log: path, end: chain) { return (tree, nil) }
                // After risc's own rotation, from the newest segment's digest: only the file being written is read.
                if let newest = try EventLogSegments.newestDigest(path), newest.digest.tree != nil {
                    summary = try EventLogVerifier.verify(files: FileManager.default.fileExists(atPath: path) ? [path] : [], keepTree: true, start: newest.digest.end)
                } else {
                    summary = try EventLogVerifier.verify(files: EventLogVerifier.files(of: path), keepTree: true)
                }
            } catch {
                return (nil, "the log cannot be read (\(error))")
            }
            if let problem = summary.problem { return (nil, "the log's chain is broken: \(problem)") }
            guard let tree = summary.tree, tree.size == chain.next else {
                return (nil, "the log cannot be read whole from its genesis (its files start at seq \(summary.firstSeq ?? 0))")
            }
            return (tree, nil)
        }

        /// Signs and writes a checkpoint of `tree`, and where the chain, the tree and the file stood
        /// (`EventLogResume`) for the next start; the flusher's thread's work only.
        private func writeCheckpoint(_ checkpoints: JSONLinesEventLog.Checkpoints, tree: MerkleRange, chain: EventLogChain, time: Double) {
            guard let path else { return }
            let checkpoint = EventLogCheckpoint(origin: origin, size: tree.size, root: tree.root, time: time)
            guard let note = try? checkpoint.signed(by: checkpoints.key) else { return }
            let file = JSONLinesEventLog.checkpointPath(of: path)
            try? PrivateFiles.writeAtomically(file, Array(note.utf8))
            if fd >= 0 { EventLogResume.write(log: path, fd: fd, chain: chain, tree: tree) }
            checkpoints.publish(note)
        }

        func record(_ record: EventLogRecord) {
            var line: [UInt8] = []
            line.reserveCapacity(384)
            record.write(to: &line)
            condition.lock()
            if buffer.count + line.count > maxBufferedBytes {
                dropped += 1
            } else {
                let start = buffer.count
                buffer.append(contentsOf: line)
                seal(from: start)
            }
            if buffer.count >= flushBytes && !failing { condition.signal() }
            condition.unlock()
        }

        /// Closes and reopens the file at `path` (for log rotation).
        func reopen() {
            condition.lock()
            if !reopenRequested { reopenAt = buffer.count }
            reopenRequested = true
            condition.signal()
            condition.unlock()
        }

        /// Flushes and stops. Idempotent.
        func close() {
            condition.lock()
            if finished {
                condition.unlock()
                return
            }
            stopping = true
            condition.broadcast()
            while !finished { condition.wait() }
            condition.unlock()
        }

        private func flushLoop() {
            while true {
                condition.lock()
                let pass = passesAsked
                if !stopping && (failing || buffer.count < flushBytes && !reopenRequested) && pass == passesDone {
                    _ = condition.wait(until: Date(timeIntervalSinceNow: flushInterval))
                }
                if dropped > 0 {  // said after the lines that were kept, in the chain's order
                    var warning = EventLogRecord(step: .log, outcome: .dropped, time: clock())
                    warning["count"] = .number(Double(dropped))
                    append(warning)
                    dropped = 0
                }
                let data = buffer
                buffer.removeAll(keepingCapacity: true)
                let reopenNow = reopenRequested && path != nil  // a log without a file has nothing to reopen
                let boundary = reopenNow ? min(reopenAt, data.count) : data.count
                reopenRequested = false
                let stop = stopping
                // A checkpoint covers exactly the lines taken here, written just below.
                var due: (JSONLinesEventLog.Checkpoints, MerkleRange, EventLogChain, Double)?
                if let checkpoints, let range, let chain, case let now = clock(), stop || hasPassed(checkpoints.interval, since: lastCheckpoint, now: now) {
                    lastCheckpoint = now
                    due = (checkpoints, range, chain, now)
                }
                condition.unlock()
                if fd < 0, let path, !data.isEmpty, !reopenNow { openAgain(path) }  // it could not be opened at the last try
                // The lines before the reopen to the file as it was; a line cut short there is
                // ended in its own file first: the reopen waits for the rest of it.
                var written = write(data[..<boundary])
                var reopened = false
                if reopenNow, let path, written == boundary || fd < 0 {
                    if fd >= 0 { Glibc.close(fd) }
                    openAgain(path)
                    midLine = false
                    reopened = true
                }
                if written == boundary || reopened { written += write(data[written...]) }
                let whole = written == data.count
                if written > 0 { midLine = data[written - 1] != 0x0A }
                if whole, let (checkpoints, tree, chain, time) = due { writeCheckpoint(checkpoints, tree: tree, chain: chain, time: time) }
                if whole, let segments, let path, fd >= 0, !stop { rotateIfDue(segments, path: path) }
                condition.lock()
                // What was not written goes back before the lines recorded since, in the chain's
                // order, to be tried again (the checkpoint that covered it with it), and a reopen
                // asked for meanwhile falls that much later.
                if !whole {
                    buffer.insert(contentsOf: data[written...], at: 0)
                    if reopenRequested { reopenAt += data.count - written }
                    if due != nil { lastCheckpoint = -Double.infinity }
                }
                if reopenNow && !reopened {
                    reopenRequested = true
                    reopenAt = boundary - written
                }
                failing = !whole
                passesDone = pass
                condition.broadcast()
                condition.unlock()
                if stop {
                    if fd >= 0 { Glibc.close(fd) }
                    fd = -1
                    condition.lock()
                    finished = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
            }
        }

        /// Returns once the flusher has written every line recorded before the call (or tried to: when
        /// the file cannot take them they wait in the buffer), and made the checkpoint and rotation that
        /// were due (by the injected clocks) with it.
        func settle() {
            condition.lock()
            passesAsked += 1
            let asked = passesAsked
            condition.broadcast()
            while passesDone < asked && !finished { condition.wait() }
            condition.unlock()
        }

        /// Closes the file into a segment with its digest when it is big or old enough, and goes on in
        /// a new file; on the flusher's thread, between two writes. A rotation that fails (its reason
        /// is the next line) leaves the file as it was, to be tried again at the next write.
        private func rotateIfDue(_ segments: EventLogSegments.Settings, path: String) {
            let now = clock()
            guard segmentBytes > 0,
                segments.maxBytes > 0 && segmentBytes >= segments.maxBytes || segments.interval > 0 && hasPassed(segments.interval, since: segmentStarted, now: now)
            else { return }
            Glibc.close(fd)
            var record: EventLogRecord
            do {
                let digest = try EventLogSegments.close(path, logID: logID, settings: segments, now: now)
                record = EventLogRecord(step: .log, outcome: .rotated, time: now)
                record["segment"] = .number(Double(digest.number))
                record["last_seq"] = .number(Double(digest.lastSeq))
                if !digest.expired.isEmpty { record["expired"] = .array(digest.expired.map { .number(Double($0)) }) }
                segmentStarted = now
            } catch {
                record = EventLogRecord(step: .log, outcome: .failed, time: now)
                record["error"] = .string("rotation: \(error)")
                segmentStarted = now  // tried again after another interval or more bytes, not at every write
            }
            openAgain(path)
            condition.lock()
            append(record)
            condition.unlock()
        }

        /// Opens the file at `path` again (after a SIGHUP, a rotation, or a try that failed): -1 while it cannot be.
        private func openAgain(_ path: String) {
            fd = Self.open(path, wait: lockWait)
            var status = stat()
            segmentBytes = fd >= 0 && fstat(fd, &status) == 0 ? Int64(status.st_size) : 0
        }

        /// Writes `data` to the file (and what reached it to standard output too); returns how many
        /// bytes were written: all of them when there is no file.
        private func write(_ data: ArraySlice<UInt8>) -> Int {
            guard !data.isEmpty else { return 0 }
            var written = data.count
            if path != nil {
                written = fd >= 0 ? writeAll(fd, data) : 0
                if written < data.count && errno == EBADF { fd = -1 }  // opened again at the next pass
                segmentBytes += Int64(written)
            }
            if toStandardOutput && written > 0 { writeAll(STDOUT_FILENO, data.prefix(written)) }
            return written
        }
    }
}
