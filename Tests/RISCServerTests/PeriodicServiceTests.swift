import Foundation
import Logging
import RISCCore
import RISCTestKit
import Synchronization
import Testing

@testable import RISCServer

/// The receiver's periodic services wait their intervals on the receiver's clock, as its deadlines
/// do: tests move the clock, and an hour's interval is not an hour of real time.
@Suite("periodic services on the injected clock")
struct PeriodicServiceTests {
    /// Counts the store's answers; its queue depth is how many times it was asked.
    final class CountingHealth: StoreHealth {
        let asked = Atomic<Int>(0)
        func isWritable() async -> Bool { true }
        func queueDepth() async throws -> Int { asked.add(1, ordering: .relaxed).newValue }
        func deadLetters() async throws -> Int { 0 }
        func retrying() async throws -> Int { 0 }
        func oldestPendingReceivedAt() async throws -> Double? { nil }
        func lastReceivedAt() async throws -> Double? { nil }
        var writeCounts: (commits: Int, rows: Int) { (0, 0) }
    }

    /// Records the time each retention batch was asked to keep to.
    final class RecordingRetention: RetentionStore {
        let times = Mutex<[Double]>([])
        func retain(_ policy: RetentionPolicy, now: Double, batch: Int) async throws -> RetentionPass {
            times.withLock { $0.append(now) }
            return RetentionPass(stripped: 1)
        }
    }

    @Test("the store's health is sampled every interval of the receiver's clock (an hour's interval slept an hour of real time)")
    func healthSamplerOnTheClock() async throws {
        let clock = TestClock(), health = CountingHealth()
        let sampler = StoreSampler(store: health, interval: 3_600, clock: clock.function)
        await sampler.sample()
        let task = Task { try await HealthSamplerService(store: sampler, metrics: nil).run() }
        defer { task.cancel() }
        for samples in 2...3 {
            let last = try #require(sampler.lastSampled)
            clock.advance(last + 3_000 - clock.now)
            try await Task.sleep(for: .milliseconds(200))
            #expect(health.asked.load(ordering: .relaxed) == samples - 1)  // not before its interval
            clock.advance(600)
            #expect(await waitWhile { sampler.current.queueDepth != samples }, "sample \(samples)")
            #expect(sampler.lastSampled == last + 3_600)
        }
    }

    @Test("the store's health is still sampled every interval after the wall clock stepped back an hour (NTP, a restored VM)")
    func healthSamplerAfterTheClockSteppedBack() async throws {
        let clock = TestClock(), health = CountingHealth()
        let sampler = StoreSampler(store: health, interval: 1, clock: clock.function)
        await sampler.sample()
        let task = Task { try await HealthSamplerService(store: sampler, metrics: nil).run() }
        defer { task.cancel() }
        // Stepped back while the sampler waits: once the first sample's deadlines are over, the
        // clock's only reader is its wait.
        try await Task.sleep(for: .milliseconds(300))
        await clock.waitForReads(3)
        clock.advance(-3_600)
        // From there the clock runs on, a second every 0.1 s of real time (whenever the sampler
        // gets to run on a loaded machine): a sample within a few of its seconds, not an hour.
        var seconds = 0
        _ = await waitWhile(upTo: 60, every: 0.1) {
            guard health.asked.load(ordering: .relaxed) < 2 else { return false }
            clock.advance(1)
            seconds += 1
            return seconds < 600
        }
        #expect(health.asked.load(ordering: .relaxed) >= 2, "no sample within \(seconds) s of the clock after it stepped back an hour")
    }

    /// A store with a long queue: counts how often each question is asked.
    final class LongQueueHealth: StoreHealth {
        let depth: Int, dead: Int
        let asked = Mutex<[String: Int]>([:])
        init(depth: Int, dead: Int) { (self.depth, self.dead) = (depth, dead) }
        private func note(_ question: String) { asked.withLock { $0[question, default: 0] += 1 } }
        func isWritable() async -> Bool {
            note("writable")
            return true
        }
        func queueDepth() async throws -> Int {
            note("depth")
            return depth
        }
        func deadLetters() async throws -> Int {
            note("dead")
            return dead
        }
        func retrying() async throws -> Int {
            note("retrying")
            return 7
        }
        func oldestPendingReceivedAt() async throws -> Double? {
            note("oldest")
            return 1_700_000_000
        }
        func lastReceivedAt() async throws -> Double? {
            note("last")
            return 1_800_000_000
        }
        var writeCounts: (commits: Int, rows: Int) { (0, 0) }
    }

    @Test(
        "a long queue is counted every 30 s, not every second (each count reads every pending SET); writability and the oldest SET's age every second"
    )
    func longQueueCountedLessOften() async throws {
        for (depth, dead) in [(50_000, 3), (40, 20_000)] {
            let clock = TestClock(), health = LongQueueHealth(depth: depth, dead: dead)
            let sampler = StoreSampler(store: health, interval: 1, clock: clock.function)
            for _ in 0..<90 {
                await sampler.sample()
                let sample = sampler.current
                #expect(sample.queueDepth == depth && sample.deadLetters == dead && sample.retrying == 7)
                clock.advance(1)
            }
            let asked = health.asked.withLock { $0 }
            for question in ["writable", "oldest", "last"] { #expect(asked[question] == 90, "\(question): \(asked)") }
            // Asked at 0, 30 and 60 s: the queue's counts with a long queue, the dead letters' with many.
            #expect(asked["depth"] == (depth > 10_000 ? 3 : 90), "\(asked)")
            #expect(asked["retrying"] == (depth > 10_000 ? 3 : 90), "\(asked)")
            #expect(asked["dead"] == (dead > 10_000 ? 3 : 90), "\(asked)")
            // The clock set back an hour: counted again at once, not an hour later.
            clock.advance(-3_600)
            await sampler.sample()
            #expect(health.asked.withLock { $0["depth"] } == (depth > 10_000 ? 4 : 91))
        }
    }

    @Test("retention passes come every interval of the receiver's clock, the first within a minute, and keep to its time")
    func retentionOnTheClock() async throws {
        let clock = TestClock(), store = RecordingRetention(), log = MemoryEventLog()
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let service = RetentionService(store: store, policy: RetentionPolicy(), interval: 86_400, log: log, logger: logger, clock: clock.function)
        let task = Task { try await service.run() }
        defer { task.cancel() }
        clock.advance(60)
        #expect(await waitWhile { store.times.withLock { $0.count } < 1 })
        clock.advance(80_000)
        try await Task.sleep(for: .milliseconds(300))
        #expect(store.times.withLock { $0.count } == 1)  // not before its interval
        clock.advance(6_400)
        #expect(await waitWhile { store.times.withLock { $0.count } < 2 })
        #expect(store.times.withLock { $0 } == [1_800_000_060, 1_800_086_460])
        #expect(log.records("retention").compactMap { $0["ts"]?.stringValue } == ["2027-01-15T08:01:00.000000Z", "2027-01-16T08:01:00.000000Z"])
    }
}
