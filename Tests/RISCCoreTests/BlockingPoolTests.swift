import Foundation
import Synchronization
import Testing

@testable import RISCCore

@Suite("BlockingPool")
struct BlockingPoolTests {
    /// Both jobs arrive, then each waits for the other (a loose bound: it runs out only when the
    /// other cannot start, i.e. when the two run one after the other).
    final class Rendezvous: @unchecked Sendable {  // reason: `arrived` is read and written under `condition`
        private let condition = NSCondition()
        private var arrived = 0

        func meet() -> Bool {
            condition.lock()
            defer { condition.unlock() }
            arrived += 1
            condition.broadcast()
            let deadline = Date().addingTimeInterval(20)
            while arrived < 2, condition.wait(until: deadline) {}
            return arrived >= 2
        }
    }

    /// Found measuring two receivers on PostgreSQL: the benchmark's two load generators, handed
    /// to the pool together, ran one after the other, because one idle thread was counted for both
    /// jobs (and so with webhook and notice calls: a job could wait behind a slow one while the pool
    /// could still grow).
    @Test("jobs handed over together run together: one idle thread is not counted for two")
    func concurrentJobsGetThreadsOfTheirOwn() async throws {
        let pool = BlockingPool(name: "test.pool", maximumThreads: 4)
        _ = await pool.run { 0 }  // one thread, now idle
        let rendezvous = Rendezvous()
        let results = Mutex<[Bool]>([])
        let done = DispatchSemaphore(value: 0)
        // Back to back, as the pool's callers do when they start several at once.
        for _ in 0..<2 {
            pool.submit {
                let met = rendezvous.meet()
                results.withLock { $0.append(met) }
                done.signal()
            }
        }
        for _ in 0..<2 { await BlockingPool.shared.run { done.wait() } }
        #expect(results.withLock { $0 } == [true, true], "the second job started only after the first had finished")
    }

    /// The threads of this process named `name` (/proc/self/task/*/comm).
    static func threads(named name: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.count { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) == name
        }
    }

    /// A test process held about 290 threads, 200 of them embedded queues' waiting for good: a
    /// pool's threads held the pool, so no pool was ever let go.
    @Test("a pool let go ends its threads once their jobs are done")
    func poolLetGoEndsItsThreads() async throws {
        var pool: BlockingPool? = BlockingPool(name: "test.poolgone", maximumThreads: 2)
        #expect(await pool!.run { 7 } == 7)
        #expect(Self.threads(named: "test.poolgone") == 1)
        pool = nil
        // The thread ends when it next wakes, just after the pool's deinit: a bounded wait for that.
        for _ in 0..<2_000 where Self.threads(named: "test.poolgone") > 0 { usleep(5_000) }
        #expect(Self.threads(named: "test.poolgone") == 0)
    }
}
