import Foundation
import RISCTestKit
import Synchronization
import Testing

/// `DiskSettle`, the benchmarks' wait for their own setup's writes and discards to reach the device
/// before a window is measured, and `DiskCounters`, what it reads.
@Suite("DiskSettle")
struct DiskSettleTests {
    @Test("/proc/diskstats lines are summed: sectors written, in flight, sectors discarded; short lines skipped")
    func counters() {
        let text = """
               7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
             254       0 vda 9030 24 812370 2100 862037 1000 39585400 80000 3 90000 120000 5012 0 16842600 300 314861 4000
             254       1 vda1 1 2 3 4 5 6 70 8 1 10 11
             253       0 zram0 1 2 3
            """
        let counters = DiskCounters(diskstats: text)
        #expect(counters == DiskCounters(sectorsWritten: 39_585_470, sectorsDiscarded: 16_842_600, inFlight: 4))
        #expect(DiskCounters.current() != nil)
    }

    @Test("/proc/stat's cpu line: all the time and the host's steal, and the share stolen between two readings")
    func stolenTime() throws {
        let before = try #require(CPUTimes(stat: "cpu  100 0 50 800 20 0 10 20 0 0\ncpu0 50 0 25 400 10 0 5 10 0 0\n"))
        #expect(before == CPUTimes(total: 1_000, steal: 20))
        let after = try #require(CPUTimes(stat: "cpu  150 0 80 900 20 0 10 40 0 0\n"))
        #expect(after.stolen(since: before) == 0.1)
        #expect(before.stolen(since: before) == 0)
        #expect(CPUTimes(stat: "intr 1 2 3\n") == nil)
        #expect(CPUTimes(stat: "cpu  1 2 3\n") == nil)
        #expect(CPUTimes.current() != nil)
    }

    /// What keeps a disk busy in `settle`.
    private enum Busy { case writes, discards, inFlight }

    /// Counters that show `busy` for `busyReads` reads, then stand still, on a clock the pauses
    /// advance (a sixteenth of a second a poll, a quarter second of quiet: exact in binary).
    private func settle(busyReads: Int, _ busy: Busy = .writes, limit: Double = 10) async -> (DiskSettle.Outcome, Int) {
        let clock = TestClock(0)
        let reads = Mutex(0)
        let outcome = await DiskSettle.wait(
            quiet: 0.25, limit: limit, interval: 0.0625, slackBytes: 1 << 20,
            read: {
                let count = reads.withLock { count in
                    count += 1
                    return count
                }
                let moving = UInt64(min(count, busyReads))
                switch busy {
                case .writes: return DiskCounters(sectorsWritten: moving * 8_192)  // 4 MiB a poll
                case .discards: return DiskCounters(sectorsWritten: moving, sectorsDiscarded: moving * 2_048)  // 512 bytes written
                case .inFlight: return DiskCounters(inFlight: count <= busyReads ? 1 : 0)
                }
            },
            now: clock.function, pause: { clock.advance($0) })
        return (outcome, reads.withLock { $0 })
    }

    @Test("waits until nothing was written, discarded or in flight for the quiet span; quiet counters return after that span")
    func waitsForQuiet() async {
        // Busy until the 21st read (at 1.25 s), then still: settled a quarter second later.
        let (busy, busyReads) = await settle(busyReads: 21)
        #expect(busy == DiskSettle.Outcome(waited: 1.5, settled: true))
        #expect(busyReads == 25)
        #expect(await settle(busyReads: 0).0 == DiskSettle.Outcome(waited: 0.25, settled: true))
        // Discards with almost nothing written, and a request in flight with nothing written, count as busy.
        #expect(await settle(busyReads: 11, .discards).0 == DiskSettle.Outcome(waited: 0.875, settled: true))
        #expect(await settle(busyReads: 11, .inFlight).0 == DiskSettle.Outcome(waited: 0.875, settled: true))
    }

    @Test("a disk that never goes quiet is given up on at the limit, not waited for")
    func givesUp() async {
        #expect(await settle(busyReads: .max, limit: 2).0 == DiskSettle.Outcome(waited: 2, settled: false))
    }

    @Test("the probe makes small writes durable on a thread of its own and reports them")
    func probe() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("disk-probe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let probe = DiskSyncProbe(directory: directory, interval: 0.001)
        #expect(await waitWhile { probe.take().syncs == 0 })
        let summary = probe.stop()
        #expect(summary.longest >= 0 && summary.slow <= summary.syncs)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }
}
