import Foundation
public import Logging
import Synchronization

/// Applies queued SETs' actions through the `WorkQueue` port, for stores that several receivers
/// share: claims due SETs with a lease, applies (or delivers to the webhook), finishes them
/// guarded by the lease, retries failures with `RetryPolicy`'s backoff, then dead-letters; rescues
/// the leases of workers that died. Any number of these, in one receiver or many, can share a
/// queue: each (SET, event, action) is applied exactly once (`WorkQueue.finish`).
///
/// Webhook deliveries are at least once: a receiver that dies after the site answered and before
/// its COMMIT leaves the SET to be rescued and delivered again. Each delivery carries the same
/// `Idempotency-Key` for the same SET, for the site to recognise a repeat.
public final class QueueWorker: Sendable {
    public struct Settings: Sendable {
        /// Who this worker is in `lease_owner` (host, pid and a random part by default).
        public var owner: String
        /// How long a claim holds before others may rescue it.
        public var lease: Double = 60
        public var batch = 8
        /// How often an idle worker looks for due work without being woken.
        public var pollInterval: Double = 0.5
        /// How often expired leases are rescued.
        public var rescueInterval: Double = 5
        /// What this worker claims (notices get workers of their own when they are on).
        public var scope = ClaimScope.all
        /// While this answers true (acknowledgements are waiting on the same disk), the worker
        /// holds back before a batch, up to `maximumDeferral` seconds: the queue is durable, so
        /// actions only lag, and applying them never delays a 202.
        public var deferWhile: (@Sendable () -> Bool)?
        public var maximumDeferral: Double = 0.05
        /// With a sink: whether every SET goes there (`all`: risc applies nothing to its
        /// accounts) or only events whose row names `webhook` (`rows`: the rest applied here).
        public var webhookScope = WebhookScope.all

        public init(owner: String = QueueWorker.defaultOwner()) { self.owner = owner }
    }

    public let queue: any WorkQueue
    public let settings: Settings
    /// What each event does and how failures are retried; SIGHUP may replace them (`update`).
    private let rules: Mutex<(table: ActionTable, retry: RetryPolicy)>
    var table: ActionTable { rules.withLock { $0.table } }
    var retry: RetryPolicy { rules.withLock { $0.retry } }
    let sink: (any ActionSink)?
    /// Every SET's plan goes to the sink, none is applied to the store's accounts.
    var sinkTakesAll: Bool { sink != nil && settings.webhookScope == .all }
    /// Sends the unlink notices queued beside the SETs (`UnlinkNotices`); nil: notices are off, and
    /// one found in the queue fails (and is retried, then dead-lettered) saying so.
    let notices: NoticeSending?
    let log: any EventLog
    /// Counts each attempt with the outcome decided here (`risc_actions_total`, `risc_notices_total`).
    let metrics: (any WorkMetrics)?
    let logger: Logger
    /// The time (seconds since 1970): when work is due, when a retry is, how long an attempt took.
    let clock: @Sendable () -> Double
    private let wakeups = Wakeup()
    private let state = Mutex<(stopping: Bool, task: Task<Void, Never>?)>((false, nil))

    public init(
        queue: any WorkQueue, settings: Settings, table: ActionTable = .default, retry: RetryPolicy = RetryPolicy(),
        sink: (any ActionSink)? = nil, notices: NoticeSending? = nil, log: any EventLog, metrics: (any WorkMetrics)? = nil, logger: Logger,
        clock: @escaping @Sendable () -> Double = systemNow
    ) {
        self.metrics = metrics
        self.clock = clock
        self.notices = notices
        self.queue = queue
        self.settings = settings
        self.rules = Mutex((table, retry))
        self.sink = sink
        self.log = log
        self.logger = logger
    }

    /// `host:pid:random`, unique per run, so a restarted receiver never mistakes its old leases
    /// for its own.
    public static func defaultOwner() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    }

    /// How far ahead of now a stored next attempt or lease end can lie while the wall clock only
    /// goes forward: the longest backoff (with its jitter) or the longest lease any worker may
    /// hold (`longestLease`: not this worker's own, since a notice worker's is longer and
    /// another receiver's may be), and a minute for the clocks of receivers sharing a store to
    /// differ. Beyond it, the time was written before the clock stepped back, and the work is due
    /// now (`QueueTime`) instead of after the step. (A receiver with a shorter backoff than
    /// another's may retry the other's SET early; a live lease is never taken.)
    public var horizon: Double {
        let retry = self.retry
        return max(retry.maximumDelay * (1 + retry.jitter), settings.lease, Self.longestLease) + Self.clockSpread
    }

    /// The longest lease a worker holds: `store.lease` and the notice workers' are at most an hour
    /// (the configuration's bounds).
    public static let longestLease: Double = 3_600

    /// How far apart the clocks of receivers sharing a store may be.
    public static let clockSpread: Double = 60

    /// Applies a reloaded action table and retry policy from the next batch on.
    public func update(table: ActionTable, retry: RetryPolicy) { rules.withLock { $0 = (table, retry) } }

    /// Asks the worker to look for work now.
    public func wake() { wakeups.signal() }

    /// Starts the loop in a task of its own.
    public func start() {
        let task = Task { await self.run() }
        state.withLock { $0.task = task }
    }

    /// Finishes the batch in hand, then stops; gives up waiting after `seconds` of the worker's
    /// clock (a store that does not answer must not keep the process from exiting: the leases
    /// expire and any receiver rescues the work). Idempotent.
    public func stop(waitingAtMost seconds: Double = 10) async {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.stopping = true
            return state.task
        }
        wakeups.signal()
        guard let task else { return }
        let finished = Wakeup()
        Task {
            await task.value
            finished.signal()
        }
        await finished.wait(until: clock() + seconds, clock: clock)
        task.cancel()
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    func run() async {
        var lastRescue = 0.0
        var claimFailing = false
        while !stopping {
            let now = clock()
            if hasPassed(settings.rescueInterval, since: lastRescue, now: now) {
                lastRescue = now
                await rescue(now: now)
            }
            if let busy = settings.deferWhile {
                while busy(), clock() - now < settings.maximumDeferral { try? await Task.sleep(for: .milliseconds(1)) }
            }
            let processed: Int
            do {
                processed = try await processDue()
                if claimFailing {
                    claimFailing = false
                    logger.notice("claiming queued work again")
                }
            } catch {
                // A claim cut short by the stop (cancelled, or the store closed behind it) is no outage.
                if !claimFailing && !stopping { logger.warning("cannot claim queued work; trying again", metadata: ["risc.error": "\(error)"]) }
                claimFailing = true
                processed = 0
            }
            if processed == 0 && !stopping {
                // Woken by a commit (ours, or another receiver's NOTIFY), or the poll interval
                // of the worker's clock.
                await wakeups.wait(until: clock() + settings.pollInterval, clock: clock, tick: 0.5)
            }
        }
    }

    /// Releases expired leases, one event-log line each. A failure is logged when it starts and
    /// the recovery once, not at every attempt of an outage.
    public func rescue(now: Double) async {
        do {
            for jti in try await queue.rescueExpiredLeases(now: now, horizon: horizon) {
                var record = EventLogRecord(step: .lease, outcome: .rescued, time: now)
                record["jti"] = .string(jti)
                record["worker"] = .string(settings.owner)
                log.record(record)
            }
            if rescueFailing.withLock({ failing in
                defer { failing = false }; return failing
            }) {
                logger.notice("rescuing expired leases again")
            }
        } catch {
            if !rescueFailing.withLock({ failing in
                defer { failing = true }; return failing
            }) {
                logger.warning("cannot rescue expired leases; trying again every \(String(format: "%g", settings.rescueInterval)) s", metadata: ["risc.error": "\(error)"])
            }
        }
    }
    private let rescueFailing = Mutex(false)

    /// Claims and processes one batch of due SETs; returns how many were claimed. The batch is
    /// finished in one transaction; if that fails, each SET is finished on its own, so one that
    /// cannot be finished fails alone. `now`: the whole batch at that time instead of the clock's.
    @discardableResult
    public func processDue(now: Double? = nil) async throws -> Int {
        let clock = now.map { fixed in { @Sendable in fixed } } ?? self.clock
        let claimed = try await queue.claim(
            owner: settings.owner, limit: settings.batch, lease: settings.lease, now: clock(), horizon: horizon, scope: settings.scope)
        var ready: [Prepared] = []
        for claim in claimed {
            if stopping && sink != nil { break }  // an undelivered claim is rescued after its lease
            if let prepared = await prepare(claim, clock) { ready.append(prepared) }
        }
        guard !ready.isEmpty else { return claimed.count }
        do {
            let reports = try await queue.finish(ready.map(\.item), applyToAccounts: !sinkTakesAll, now: clock())
            for (prepared, report) in zip(ready, reports) { record(prepared, report, clock) }
        } catch  where ready.count > 1 {
            for prepared in ready { await finishAlone(prepared, clock) }
        } catch {
            await fail(ready[0].item.claim, error, record: ready[0].record, start: ready[0].start, clock)
        }
        return claimed.count
    }

    /// A claim parsed, planned and (with a webhook) delivered, waiting to be finished.
    struct Prepared {
        let item: FinishItem
        var record: EventLogRecord
        let start: Double
        let delivered: [String]
        /// An unlink notice (published, not applied).
        var notice = false
    }

    /// Parses and plans `claim` and delivers it to the webhook if there is one; nil when that
    /// failed (the failure is recorded).
    private func prepare(_ claim: ClaimedSET, _ clock: @Sendable () -> Double) async -> Prepared? {
        let start = clock()
        if claim.issuer == UnlinkNotices.queueIssuer { return await publish(claim, start: start, clock) }
        var record = EventLogRecord.applied(jti: claim.jti, attempt: claim.attempts + 1, time: start)
        record["worker"] = .string(settings.owner)
        if sinkTakesAll { record["sink"] = "webhook" }
        do {
            let claims = try SecurityEventToken(payload: CompactJWS(claim.token).payload)
            let plan = ActionPlan.plan(for: claims, table: table, now: start)
            record.describe(plan)
            var delivered: [String] = []
            var tokens: [TokenToRevoke] = []
            let key = Self.idempotencyKey(issuer: claim.issuer, jti: claim.jti), issuer = claims.issuer ?? claim.issuer
            if let sink, sinkTakesAll {
                tokens = try await queue.tokensToRevoke(plan, keyIssuer: claim.issuer)
                let now = clock()
                delivered = try await BlockingPool.receiver.run { [tokens] in
                    Result { try sink.deliver(plan, tokens: tokens, tokenID: claim.jti, issuer: issuer, idempotencyKey: key, appliedByRISC: false, now: now) }
                }.get()
            } else if plan.deliversToWebhook {
                // The row chose the webhook: told first, then the rest applied with the finish.
                guard let sink else { throw NoWebhook() }
                let notice = plan.webhookNotice, now = clock()
                record["webhook"] = .string(
                    try await BlockingPool.receiver.run {
                        Result { try sink.deliver(notice, tokens: [], tokenID: claim.jti, issuer: issuer, idempotencyKey: key, appliedByRISC: true, now: now) }
                    }.get().first ?? "delivered")
            }
            return Prepared(
                item: FinishItem(claim: claim, plan: plan, claims: claims, tokens: tokens), record: record, start: start, delivered: delivered)
        } catch {
            await fail(claim, error, record: record, start: start, clock)
            return nil
        }
    }

    /// Publishes an unlink notice; nil when that failed (the failure is recorded).
    private func publish(_ claim: ClaimedSET, start: Double, _ clock: @Sendable () -> Double) async -> Prepared? {
        var record = EventLogRecord.published(jti: claim.jti, attempt: claim.attempts + 1, time: start)
        record["worker"] = .string(settings.owner)
        do {
            let answer = try await BlockingPool.receiver.run { [notices] in
                Result { try NoticeSending.send(notices, stored: claim.token, tokenID: claim.jti) }
            }.get()
            record["result"] = .string(answer)
            let item = FinishItem(claim: claim, plan: ActionPlan(steps: [], eventTime: start), claims: nil)
            return Prepared(item: item, record: record, start: start, delivered: [], notice: true)
        } catch {
            await fail(claim, error, record: record, start: start, clock)
            return nil
        }
    }

    private func finishAlone(_ prepared: Prepared, _ clock: @Sendable () -> Double) async {
        do {
            let reports = try await queue.finish([prepared.item], applyToAccounts: !sinkTakesAll, now: clock())
            record(prepared, reports.first ?? nil, clock)
        } catch {
            await fail(prepared.item.claim, error, record: prepared.record, start: prepared.start, clock)
        }
    }

    /// The event-log lines of a finished claim (`lease_lost` when `report` is nil).
    private func record(_ prepared: Prepared, _ report: FinishReport?, _ clock: @Sendable () -> Double) {
        var record = prepared.record
        defer {
            record.latency = clock() - prepared.start
            write(record, notice: prepared.notice, refused: false)
            for verification in report?.verifications ?? [] { log.record(verification) }
        }
        guard let report else {
            record.outcome = .leaseLost
            return
        }
        if prepared.notice {
            return
        } else if sinkTakesAll {
            record["actions"] = TokenToRevoke.results(prepared.item.plan, delivered: prepared.delivered, tokens: prepared.item.tokens)
        } else {
            record["actions"] = ActionOutcome.json(report.outcomes)
        }
    }

    private func fail(_ claim: ClaimedSET, _ error: any Error, record: EventLogRecord, start: Double, _ clock: @Sendable () -> Double) async {
        var record = record
        let now = clock()
        let attempt = claim.attempts + 1
        let delay = retry.delay(after: error, failures: attempt, age: now - claim.retrySince)
        record.outcome = delay == nil ? .deadLettered : .failed
        if error is any Unretryable { record["refused"] = true }
        record["error"] = .string(String(describing: error).prefix(300).description)
        if let delay { record["retry_at"] = .string(Timestamp.iso8601(now + delay)) }
        record.latency = now - start
        do {
            if try await !queue.fail(claim, error: String(describing: error), retryAt: delay.map { now + $0 }, now: now) {
                record.outcome = .leaseLost
            }
        } catch {
            // The store itself is failing: the lease expires and the SET is rescued then.
            logger.error("cannot record a failed attempt", metadata: ["risc.jti": "\(claim.jti)", "risc.error": "\(error)"])
        }
        if error is any Unretryable {
            logger.error("dead-lettered a queued row risc will not act on", metadata: ["risc.jti": "\(Printable.safe(claim.jti))", "risc.error": "\(error)"])
        } else if delay == nil {
            logger.warning("SET dead-lettered after \(attempt) attempts", metadata: ["risc.jti": "\(claim.jti)"])
        }
        write(record, notice: claim.issuer == UnlinkNotices.queueIssuer, refused: error is any Unretryable)
    }

    /// Writes an attempt's line and counts it, with the outcome decided above.
    private func write(_ record: EventLogRecord, notice: Bool, refused: Bool) {
        if notice {
            metrics?.observeNotice(outcome: record.outcome, refused: refused)
        } else {
            metrics?.observeAction(outcome: record.outcome, seconds: record.latency)
        }
        log.record(record)
    }

    /// The key every webhook delivery of one SET carries: hex SHA-256 of the issuer, a NUL and
    /// the `jti`. The same on every receiver and every attempt.
    public static func idempotencyKey(issuer: String, jti: String) -> String {
        SHA256.hex(Array(issuer.utf8) + [0] + Array(jti.utf8))
    }
}

/// A wake-up that is not lost when it comes before the wait, and a wait that ends at a deadline
/// without one.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The wait in progress, and its deadline's task (cancelled when a signal ends the wait).
        var generation = 0
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(State())

    func signal() { end(generation: nil) }

    /// Resumes the waiter (the one of `generation`, when given); without one, the next wait
    /// returns at once, unless this was a deadline whose wait is over.
    private func end(generation: Int?) {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            guard let waiter = state.waiter, generation == nil || generation == state.generation else {
                if generation == nil { state.pending = true }
                return (nil, nil)
            }
            defer { (state.waiter, state.timer) = (nil, nil) }
            return (waiter, state.timer)
        }
        if generation == nil { timer?.cancel() }
        waiter?.resume()
    }

    /// Returns at the first signal (or at once if one came since the last wait), or once `clock`
    /// reads `end` (seconds; tests move it), looked at every `tick` seconds of real time.
    func wait(until end: Double, clock: @escaping @Sendable () -> Double, tick: Double = 0.1) async {
        let since = clock()
        await withCheckedContinuation { continuation in
            let generation = state.withLock { state -> Int? in
                if state.pending {
                    state.pending = false
                    return nil
                }
                state.generation += 1
                state.waiter = continuation
                return state.generation
            }
            guard let generation else { return continuation.resume() }
            let timer = Task {
                await waitUntil(end, since: since, clock: clock, tick: tick)
                if !Task.isCancelled { self.end(generation: generation) }
            }
            // A signal that came before the task was stored had none to cancel: cancel it here.
            let over = state.withLock { state -> Bool in
                guard state.waiter != nil, state.generation == generation else { return true }
                state.timer = timer
                return false
            }
            if over { timer.cancel() }
        }
    }
}

/// A row names the action `webhook` but this receiver has no webhook (`webhook.url`): retried,
/// so that a receiver started with one delivers it.
struct NoWebhook: Error, CustomStringConvertible {
    var description: String { "a row names the action webhook but webhook.url is not set" }
}
