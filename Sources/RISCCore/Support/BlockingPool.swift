import Foundation

/// A few dedicated OS threads for blocking calls (`curl_easy_perform`), so they never occupy
/// Swift concurrency's cooperative threads or libdispatch's workers.
public final class BlockingPool: Sendable {
    /// What the pool's threads share: the jobs and counts, under `condition`. The threads hold
    /// this, not the pool, so that a pool let go (an embedded queue's, its store closed) ends its
    /// threads: they held the pool itself, and every embedded queue a process ever opened left a
    /// thread waiting for good.
    private final class Work: @unchecked Sendable {  // reason: every field is read and written under `condition`
        let condition = NSCondition()
        var jobs: [@Sendable () -> Void] = []
        var idle = 0
        var threads = 0
        var closed = false
    }

    private let work = Work()
    /// The most threads it starts.
    public let maximum: Int
    private let name: String

    /// The pool for clients' outbound HTTP (the CLI's, tests', `risc bench`'s): `CurlHTTPClient`'s default.
    public static let shared = BlockingPool(name: "risc.blocking", maximumThreads: 16)

    /// The receiver's own outbound calls: key fetches, webhook deliveries, unlink notices. A pool
    /// of their own, so that clients in the same process waiting on this receiver's answers (a test
    /// process with many receivers, `risc bench`) never hold the threads those answers need: with
    /// one pool, sixteen clients waiting on a receiver whose key fetch needed a seventeenth thread
    /// waited until curl's timeout.
    public static let receiver = BlockingPool(name: "risc.receiver", maximumThreads: 16)

    /// The embedded store's blocking calls (the account API's): a pool of their own, so slow
    /// outbound HTTP (webhook and notice calls, key fetches) holding every thread of `shared`
    /// never keeps an account call waiting. (A test process with many clients waiting on its own
    /// receivers' answers showed it: the answer needed a thread the waiting clients held.)
    public static let storage = BlockingPool(name: "risc.storage", maximumThreads: 8)

    public init(name: String, maximumThreads: Int) {
        self.name = name
        self.maximum = maximumThreads
    }

    /// Jobs already handed over still run; then the threads end.
    deinit {
        work.condition.lock()
        work.closed = true
        work.condition.broadcast()
        work.condition.unlock()
    }

    /// Runs `body` on a pool thread and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Hands `job` to a thread: an idle one, or a new one while there are fewer than `maximum`.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let work = self.work
        work.condition.lock()
        work.jobs.append(job)
        // Every waiting job needs a thread of its own: an idle thread that has been signalled but
        // not woken yet is still counted in `idle`, so compare with the jobs waiting, not with 0.
        if work.jobs.count > work.idle && work.threads < maximum {
            work.threads += 1
            OSThread.start(name: name) { Self.serve(work) }
        } else {
            work.condition.signal()
        }
        work.condition.unlock()
    }

    private static func serve(_ work: Work) {
        while true {
            work.condition.lock()
            while work.jobs.isEmpty && !work.closed {
                work.idle += 1
                work.condition.wait()
                work.idle -= 1
            }
            if work.jobs.isEmpty {  // closed, and nothing left to run
                work.threads -= 1
                work.condition.unlock()
                return
            }
            let job = work.jobs.removeFirst()
            work.condition.unlock()
            job()
        }
    }
}
