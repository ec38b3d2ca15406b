public import Foundation
import RISCCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The machine's block-device counters (`/proc/diskstats`, every device summed): what a benchmark
/// reads to tell its own setup's writes from the window it measures.
public struct DiskCounters: Equatable, Sendable {
    public var sectorsWritten: UInt64 = 0
    public var sectorsDiscarded: UInt64 = 0
    /// Requests the devices hold now.
    public var inFlight: UInt64 = 0

    public init(sectorsWritten: UInt64 = 0, sectorsDiscarded: UInt64 = 0, inFlight: UInt64 = 0) {
        (self.sectorsWritten, self.sectorsDiscarded, self.inFlight) = (sectorsWritten, sectorsDiscarded, inFlight)
    }

    /// Sums `/proc/diskstats` lines: field 10 (sectors written), 12 (in flight) and, where the
    /// kernel reports it (4.18+), 17 (sectors discarded). Lines too short to hold them are skipped.
    public init(diskstats text: String) {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 14, let written = UInt64(fields[9]), let inFlight = UInt64(fields[11]) else { continue }
            sectorsWritten &+= written
            self.inFlight &+= inFlight
            if fields.count >= 17, let discarded = UInt64(fields[16]) { sectorsDiscarded &+= discarded }
        }
    }

    /// This machine's counters now; nil where `/proc/diskstats` cannot be read.
    public static func current() -> DiskCounters? {
        (try? String(contentsOfFile: "/proc/diskstats", encoding: .utf8)).map(DiskCounters.init(diskstats:))
    }
}

/// Waits for the disks to go quiet before a benchmark measures: what the benchmark itself wrote or
/// deleted between windows (a removed data directory's discards, PostgreSQL's checkpoint at DROP
/// DATABASE, copied token files) otherwise reaches the device inside the next window, and every
/// fsync a receiver makes there waits behind it.
public enum DiskSettle {
    /// What waiting found: how long it took, and whether the disks went quiet before the limit.
    public struct Outcome: Equatable, Sendable {
        public var waited: Double
        public var settled: Bool
        public init(waited: Double, settled: Bool) { (self.waited, self.settled) = (waited, settled) }
    }

    /// Polls `read` every `interval` seconds until, over `quiet` seconds, at most `slackBytes` were
    /// written, nothing was discarded and nothing is in flight; gives up after `limit` seconds.
    /// Time comes from `now` and passes in `pause`, so a test drives it.
    public static func wait(
        quiet: Double = 0.3, limit: Double = 10, interval: Double = 0.05, slackBytes: UInt64 = 1 << 20,
        read: () -> DiskCounters?, now: () -> Double, pause: (Double) async -> Void
    ) async -> Outcome {
        let start = now()
        guard var since = read() else { return Outcome(waited: 0, settled: false) }
        var sinceTime = start
        while true {
            await pause(interval)
            let time = now()
            guard let counters = read() else { return Outcome(waited: time - start, settled: false) }
            let written = (counters.sectorsWritten &- since.sectorsWritten) * 512
            if written > slackBytes || counters.sectorsDiscarded != since.sectorsDiscarded || counters.inFlight > 0 {
                (since, sinceTime) = (counters, time)
            } else if time - sinceTime >= quiet {
                return Outcome(waited: time - start, settled: true)
            }
            if time - start >= limit { return Outcome(waited: time - start, settled: false) }
        }
    }

    /// `sync(2)` (dirty pages written, the filesystems' journals committed, and with them the
    /// discards of what was deleted), then `wait` on this machine's counters and real time.
    public static func afterSync(limit: Double = 10) async -> Outcome {
        await BlockingPool.shared.run { sync() }
        let clock = ContinuousClock(), origin = clock.now
        return await wait(
            limit: limit, read: { DiskCounters.current() }, now: { (clock.now - origin).seconds },
            pause: { try? await Task.sleep(for: .milliseconds(Int64($0 * 1_000))) })
    }
}

/// A 4 KiB write and `fdatasync` every `interval` seconds on a thread of its own, in a file of
/// `directory`: how long the disk takes to make a small write durable while a window is measured,
/// beside the receivers' own fsyncs. A receiver's p99 cannot be below the stalls this sees, since
/// every 202 waits for an fsync of its own.
public final class DiskSyncProbe: Sendable {
    /// What the probe saw since it started or since the last `take()`.
    public struct Summary: Equatable, Sendable {
        public var syncs = 0
        /// Syncs that took longer than `DiskSyncProbe.slow`.
        public var slow = 0
        /// The longest, in milliseconds.
        public var longest = 0.0
    }

    /// A sync this long or longer counts as slow: a receiver's 20 ms p99 target.
    public static let slow = 0.020
    private let path: String
    private let interval: Double
    private let state = Mutex<(summary: Summary, running: Bool)>((Summary(), true))
    /// Signalled once by the thread as it ends.
    private let finished = DispatchSemaphore(value: 0)

    public init(directory: URL, interval: Double = 0.02) {
        path = directory.appendingPathComponent("disk-probe-\(UUID().uuidString)").path
        self.interval = interval
        let thread = Thread { [self] in run() }
        thread.name = "risc.disk-probe"
        thread.start()
    }

    /// The summary since the last call, and a fresh one started.
    public func take() -> Summary {
        state.withLock { state in
            defer { state.summary = Summary() }
            return state.summary
        }
    }

    /// Ends the thread and removes its file (call it once); returns what it saw since the last `take()`. Blocks
    /// until the thread has finished its last sync (from async code: on a `BlockingPool`).
    public func stop() -> Summary {
        let summary = state.withLock { state in
            state.running = false
            return state.summary
        }
        finished.wait()
        return summary
    }

    private func run() {
        defer {
            unlink(path)
            finished.signal()
        }
        let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0x2E, count: 4_096)
        let clock = ContinuousClock()
        var offset: off_t = 0
        while state.withLock({ $0.running }) {
            let start = clock.now
            _ = block.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, offset) }
            _ = fdatasync(descriptor)
            let took = (clock.now - start).seconds
            // Overwrites the same 4 MiB: the file's size stops changing after its first pass.
            offset = (offset + 4_096) % (4 << 20)
            state.withLock { state in
                state.summary.syncs += 1
                if took >= Self.slow { state.summary.slow += 1 }
                state.summary.longest = max(state.summary.longest, took * 1_000)
            }
            usleep(useconds_t(interval * 1_000_000))
        }
    }
}

/// The machine's CPU time from `/proc/stat`'s first line, in clock ticks: all of it, and what the
/// hypervisor ran elsewhere while this VM's CPUs wanted to run (`steal`). A window in which the
/// host took much of it ran slower for every receiver alike.
public struct CPUTimes: Equatable, Sendable {
    public var total: UInt64 = 0
    public var steal: UInt64 = 0

    public init(total: UInt64 = 0, steal: UInt64 = 0) { (self.total, self.steal) = (total, steal) }

    /// The `cpu` line's user, nice, system, idle, iowait, irq, softirq and steal fields (guest time
    /// is counted in user already); nil without such a line.
    public init?(stat text: String) {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard fields.count == 8 else { return nil }
        (total, steal) = (fields.reduce(0, +), fields[7])
    }

    public static func current() -> CPUTimes? {
        (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)).flatMap(CPUTimes.init(stat:))
    }

    /// The share of the CPU time from `earlier` to this one that the host took, 0...1.
    public func stolen(since earlier: CPUTimes) -> Double {
        guard total > earlier.total else { return 0 }
        return Double(steal &- earlier.steal) / Double(total - earlier.total)
    }
}
