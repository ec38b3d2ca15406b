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
/// cannot be written, lines wait in the buffer (bounded by `maxBufferedBytes`, past which the
/// oldest are counted in `dropped` and a warning line is written when writing works again).
public final class JSONLinesEventLog: EventLog, @unchecked Sendable {  // reason: every mutable field is read and written under `condition`
    public let path: String?
    private let toStandardOutput: Bool
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    private var fd: Int32 = -1
    private var stopping = false
    private var finished = false
    private var reopenRequested = false
    private var dropped = 0
    private let flushInterval: Double
    private let flushBytes = 256 * 1024
    private let maxBufferedBytes = 64 * 1024 * 1024

    public init(path: String?, toStandardOutput: Bool = false, flushInterval: Double = 0.02) throws {
        self.path = path
        self.toStandardOutput = toStandardOutput
        self.flushInterval = flushInterval
        if let path {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                finished = true  // no flush thread to wait for: deinit's close() returns at once
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
        }
        OSThread.start(name: "risc.eventlog") { [unowned self] in self.flushLoop() }
    }

    deinit { close() }

    public func record(_ record: EventLogRecord) {
        var line: [UInt8] = []
        line.reserveCapacity(384)
        record.write(to: &line)
        condition.lock()
        if buffer.count + line.count > maxBufferedBytes {
            dropped += 1
        } else {
            buffer.append(contentsOf: line)
        }
        if buffer.count >= flushBytes { condition.signal() }
        condition.unlock()
    }

    /// Closes and reopens the file at `path` (for log rotation).
    public func reopen() {
        condition.lock()
        reopenRequested = true
        condition.signal()
        condition.unlock()
    }

    /// Writes everything buffered now; returns when done.
    public func flush() {
        condition.lock()
        let data = buffer
        buffer.removeAll(keepingCapacity: true)
        condition.unlock()
        write(data)
    }

    /// Flushes and stops. Idempotent.
    public func close() {
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
            if !stopping && buffer.count < flushBytes && !reopenRequested {
                _ = condition.wait(until: Date(timeIntervalSinceNow: flushInterval))
            }
            let data = buffer
            buffer.removeAll(keepingCapacity: true)
            let reopenNow = reopenRequested
            reopenRequested = false
            let stop = stopping
            let lost = dropped
            dropped = 0
            condition.unlock()
            if lost > 0 {
                var warning = EventLogRecord(step: .log, outcome: .dropped, time: Date().timeIntervalSince1970)
                warning["count"] = .number(Double(lost))
                var line: [UInt8] = []
                warning.write(to: &line)
                write(line)
            }
            write(data)
            if reopenNow, let path {
                if fd >= 0 { Glibc.close(fd) }
                fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
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

    private func write(_ data: [UInt8]) {
        guard !data.isEmpty else { return }
        if fd >= 0 { writeAll(fd, data) }
        if toStandardOutput { writeAll(STDOUT_FILENO, data) }
    }
}
