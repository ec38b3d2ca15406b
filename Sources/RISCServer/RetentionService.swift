import Foundation
import Logging
import RISCCore
import ServiceLifecycle
import Synchronization

/// Applies the retention policy every `interval` of its clock (the first pass after at most a minute): as many
/// batches as there is work, each a short transaction; one event-log line per pass that did
/// anything (`"step":"retention"`, `stripped`, `forgotten`). SIGHUP may change the policy
/// (`update`); while it keeps everything (`retention.done = 0`) a pass does nothing.
final class RetentionService: Service, Sendable {
    let store: any RetentionStore
    private let current: Mutex<RetentionPolicy>
    var policy: RetentionPolicy { current.withLock { $0 } }
    let interval: Double
    let log: any EventLog
    let logger: Logger
    /// When passes are due and what "now" is to the policy (seconds since 1970; tests move it).
    let clock: @Sendable () -> Double
    /// At most a minute after the service was made; each next pass an interval after the last.
    let firstPass: Double
    static let batch = 1_000

    init(
        store: any RetentionStore, policy: RetentionPolicy, interval: Double, log: any EventLog, logger: Logger,
        clock: @escaping @Sendable () -> Double = systemNow
    ) {
        self.store = store
        self.clock = clock
        firstPass = clock() + min(interval, 60)
        self.current = Mutex(policy)
        self.interval = interval
        self.log = log
        self.logger = logger
    }

    /// The policy from the next pass on.
    func update(_ policy: RetentionPolicy) { current.withLock { $0 = policy } }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var due = self.firstPass
            while !Task.isCancelled {
                await waitUntil(due, clock: self.clock)
                if Task.isCancelled { return }
                let now = self.clock()
                await self.pass(now: now)
                // From the pass's start; from now if the clock stepped back meanwhile.
                due = min(now, self.clock()) + self.interval
            }
        }
    }

    /// Runs batches until one does less than a full batch of each step.
    @discardableResult
    func pass(now: Double) async -> RetentionPass {
        var total = RetentionPass()
        let policy = self.policy
        guard policy.isOn else { return total }
        do {
            while !Task.isCancelled {
                let step = try await store.retain(policy, now: now, batch: Self.batch)
                total.stripped += step.stripped
                total.forgotten += step.forgotten
                if step.stripped < Self.batch && step.forgotten < Self.batch { break }
                try? await Task.sleep(for: .milliseconds(10))  // let ingest in between batches
            }
        } catch {
            logger.error("retention pass failed; retried at the next interval", metadata: ["risc.error": "\(error)"])
        }
        if total != RetentionPass() {
            var record = EventLogRecord(step: .retention, outcome: .pruned, time: clock())
            record["stripped"] = .number(Double(total.stripped))
            record["forgotten"] = .number(Double(total.forgotten))
            log.record(record)
        }
        return total
    }
}
