import Foundation
import Logging
import RISCCore

/// Takes stored SETs in arrival order and applies their actions, each SET in one transaction.
/// A failure is retried with `RetryPolicy`'s backoff, then dead-lettered (`state = 'dead'`):
/// nothing is dropped, and a restart resumes pending and scheduled work because the queue is the
/// `sets` table itself. Every attempt is written to the event log.
public final class ActionWorker: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let applier: EmbeddedActionApplier
    private let table: ActionTable
    private let sink: (any ActionSink)?
    /// Sends queued unlink notices (`UnlinkNotices`); nil: a notice found in the queue fails.
    private let notices: NoticeSending?
    /// What this worker takes from the queue: with notices on, a second worker takes them alone,
    /// so a slow Google never holds up the actions of incoming events.
    private let scope: ClaimScope
    private let retry: RetryPolicy
    private let log: any EventLog
    private let logger: Logger
    private let pollInterval: Double
    private let condition = NSCondition()
    private var stopping = false
    private var stopped = false
    private var running = false
    /// When set and true, acknowledgements are waiting: the worker defers (up to `maximumDeferral`)
    /// so that applying actions never delays a 202. The queue is durable, so actions only lag.
    public var ingestIsBusy: (@Sendable () -> Bool)?
    public var maximumDeferral: Double = 0.05

    public init(
        directory: String, table: ActionTable = .default, retry: RetryPolicy = RetryPolicy(), sink: (any ActionSink)? = nil,
        publisher: (any NoticePublisher)? = nil, scope: ClaimScope = .all, log: any EventLog, logger: Logger, pollInterval: Double = 0.05,
        tokenKeyFile: String? = nil
    ) throws {
        self.sink = sink
        self.scope = scope
        let path = (directory as NSString).appendingPathComponent("risc.sqlite3")
        connection = try SQLiteConnection(path: path)
        try connection.execute("PRAGMA foreign_keys = ON")
        // Account, session and token lookups touch pages all over the file: keep more of them in memory.
        try connection.execute("PRAGMA cache_size = -8192")
        try SQLiteEventStore.migrate(connection)
        let tokenKey = try AccountStore.loadKey(directory: directory, file: tokenKeyFile)
        applier = EmbeddedActionApplier(connection: connection, tokenKey: tokenKey)
        notices = publisher.map { NoticeSending(publisher: $0, tokenKey: tokenKey) }
        self.table = table
        self.retry = retry
        self.log = log
        self.logger = logger
        self.pollInterval = pollInterval
    }

    /// Starts the worker thread.
    public func start() {
        condition.lock()
        running = true
        condition.unlock()
        OSThread.start(name: scope == .notices ? "risc.notices" : "risc.actions") { [self] in loop() }
    }

    /// Asks the worker to look for work now (after a commit).
    public func wake() {
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// Finishes the SET in hand, then stops. Idempotent.
    public func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while running && !stopped { condition.wait() }
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            if stopping {
                stopped = true
                condition.broadcast()
                condition.unlock()
                return
            }
            condition.unlock()
            if let busy = ingestIsBusy {
                let start = Date()
                while busy(), Date().timeIntervalSince(start) < maximumDeferral { usleep(500) }
            }
            let processed = (try? processDue(limit: 8)) ?? 0
            if processed == 0 {
                condition.lock()
                if !stopping { _ = condition.wait(until: Date(timeIntervalSinceNow: pollInterval)) }
                condition.unlock()
            }
        }
    }

    /// Processes up to `limit` due SETs; returns how many. Public for tests and `risc replay --local`.
    @discardableResult
    public func processDue(limit: Int, now: Double = Date().timeIntervalSince1970) throws -> Int {
        // In the queue index's order (due time, then arrival): with a bound LIMIT the planner would
        // otherwise scan the whole table in rowid order, reading every page when nothing is due.
        let due = try connection.cached("""
            SELECT id, issuer, jti, token, attempts, coalesce(retry_since, received_at) FROM sets INDEXED BY sets_queue
            WHERE state = 'pending' AND next_attempt_at <= ?1 AND (?3 OR (issuer = ?4) = ?5) ORDER BY next_attempt_at, id LIMIT ?2
            """)
        try due.bind([
            .double(now), .int(Int64(limit)), .int(scope == .all ? 1 : 0), .text(UnlinkNotices.queueIssuer), .int(scope == .notices ? 1 : 0),
        ])
        var items: [Item] = []
        var notices: [Item] = []
        while try due.step() {
            let item = (due.int(0), due.text(1) ?? "", due.text(2) ?? "", due.text(3) ?? "", Int(due.int(4)), due.double(5))
            if item.1 == UnlinkNotices.queueIssuer { notices.append(item) } else { items.append(item) }
        }
        due.reset()
        if !notices.isEmpty { publish(notices, now: now) }
        guard !items.isEmpty else { return notices.count }
        if let sink { return notices.count + deliver(items, to: sink, now: now) }
        // One transaction (one fsync) for the whole batch; each SET inside its own savepoint, so
        // a failing one rolls back alone and is scheduled for a retry after the commit.
        var records: [EventLogRecord] = []
        var failures: [(item: Item, error: any Error, record: EventLogRecord)] = []
        WriteLock.lock.lock()
        defer { WriteLock.lock.unlock() }
        try connection.execute("BEGIN IMMEDIATE")
        do {
            for item in items {
                let start = Date().timeIntervalSince1970
                var record = EventLogRecord.applied(jti: item.jti, attempt: item.attempts + 1, time: start)
                try connection.execute("SAVEPOINT item")
                do {
                    var verifications: [EventLogRecord] = []
                    try apply(item, now: now, record: &record, verifications: &verifications)
                    try connection.execute("RELEASE item")
                    record["latency_us"] = .number(((Date().timeIntervalSince1970 - start) * 1e6).rounded())
                    records.append(record)
                    records += verifications
                } catch {
                    try connection.execute("ROLLBACK TO item")
                    try connection.execute("RELEASE item")
                    failures.append((item, error, record))
                }
            }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
        for record in records { log.record(record) }
        for failure in failures { recordFailure(failure.item, failure.error, record: failure.record, now: now) }
        // (recordFailure runs under the write lock too: the defer above releases it after this.)
        return notices.count + items.count
    }

    typealias Item = (id: Int64, issuer: String, jti: String, token: String, attempts: Int, retrySince: Double)

    /// Unlink notices: one HTTP call each (outside any transaction), then a short write.
    private func publish(_ notices: [Item], now: Double) {
        oneCallEach(notices, now: now, record: { EventLogRecord.published(jti: $0.jti, attempt: $0.attempts + 1, time: $1) }) { item, record in
            record["result"] = .string(try NoticeSending.send(self.notices, stored: item.token, tokenID: item.jti))
            try WriteLock.withLock {
                try connection.immediateTransaction { try markDone(item, now: Date().timeIntervalSince1970) }
            }
            return []
        }
    }

    private func markDone(_ item: Item, now: Double) throws {
        try connection.cached(
            "UPDATE sets SET state = 'done', attempts = ?1, processed_at = ?2, last_error = NULL WHERE id = ?3"
        ).run([.int(Int64(item.attempts + 1)), .double(now), .int(item.id)])
    }

    /// Webhook mode: one HTTP delivery per SET (outside any transaction), then a short write.
    private func deliver(_ items: [Item], to sink: any ActionSink, now: Double) -> Int {
        let line = { (item: Item, start: Double) -> EventLogRecord in
            var record = EventLogRecord.applied(jti: item.jti, attempt: item.attempts + 1, time: start)
            record["sink"] = "webhook"
            return record
        }
        oneCallEach(items, now: now, record: line) { item, record in
            let token = try Self.token(from: item.token)
            let plan = ActionPlan.plan(for: token, table: table)
            record["events"] = .array(plan.steps.map { .string($0.type.shortName) })
            let tokens = try applier.tokensToRevoke(plan, keyIssuer: item.issuer)
            let results = try sink.deliver(
                plan, tokens: tokens, tokenID: item.jti, issuer: token.issuer ?? item.issuer,
                idempotencyKey: QueueWorker.idempotencyKey(issuer: item.issuer, jti: item.jti))
            let verifications = try WriteLock.withLock {
                try connection.immediateTransaction {
                    try applier.markRevoked(tokens, now: now)
                    try markDone(item, now: now)
                    return try VerificationLedger.records(
                        for: plan, claims: token, id: item.id, jti: item.jti, compact: item.token, connection: connection)
                }
            }
            record["actions"] = TokenToRevoke.results(plan, delivered: results, tokens: tokens)
            return verifications
        }
        return items.count
    }

    /// Items that each need a call outside any transaction (a webhook delivery, a notice), one at
    /// a time until the worker is asked to stop: `call` fills the item's event-log line and returns
    /// lines to write after it; a throw records the failure (retry or dead letter).
    private func oneCallEach(
        _ items: [Item], now: Double, record line: (Item, Double) -> EventLogRecord,
        call: (Item, inout EventLogRecord) throws -> [EventLogRecord]
    ) {
        for item in items {
            condition.lock()
            let stop = stopping
            condition.unlock()
            if stop { break }
            let start = Date().timeIntervalSince1970
            var record = line(item, start)
            do {
                let followUp = try call(item, &record)
                record["latency_us"] = .number(((Date().timeIntervalSince1970 - start) * 1e6).rounded())
                log.record(record)
                for extra in followUp { log.record(extra) }
            } catch {
                record["latency_us"] = .number(((Date().timeIntervalSince1970 - start) * 1e6).rounded())
                WriteLock.withLock { recordFailure(item, error, record: record, now: now) }
            }
        }
    }

    private func apply(
        _ item: Item, now: Double, record: inout EventLogRecord,
        verifications: inout [EventLogRecord]
    ) throws {
        let token = try Self.token(from: item.token)
        let plan = ActionPlan.plan(for: token, table: table)
        verifications += try VerificationLedger.records(for: plan, claims: token, id: item.id, jti: item.jti, compact: item.token, connection: connection)
        record.describe(plan)
        let outcomes = try applier.apply(plan, setID: item.id, keyIssuer: item.issuer, now: now)
        try markDone(item, now: now)
        record["actions"] = EmbeddedActionApplier.json(outcomes)
    }

    private func recordFailure(
        _ item: Item, _ error: any Error,
        record: EventLogRecord, now: Double
    ) {
        var record = record
        let attempt = item.attempts + 1
        let delay = retry.delay(after: error, failures: attempt, age: now - item.retrySince)
        record["outcome"] = delay == nil ? "dead_lettered" : "failed"
        if error is any Unretryable { record["refused"] = true }
        record["error"] = .string(String(describing: error).prefix(300).description)
        if let delay { record["retry_at"] = .string(Timestamp.iso8601(now + delay)) }
        do {
            try connection.cached("""
                UPDATE sets SET attempts = ?1, last_error = ?2, next_attempt_at = ?3, state = ?4 WHERE id = ?5
                """).run([
                .int(Int64(attempt)), .text(String(describing: error)), .double(now + (delay ?? 0)),
                .text(delay == nil ? "dead" : "pending"), .int(item.id),
            ])
        } catch {
            logger.error("cannot record a failed attempt", metadata: ["risc.jti": "\(item.jti)", "risc.error": "\(error)"])
        }
        if error is any Unretryable {
            logger.error("dead-lettered a queued row risc will not act on", metadata: ["risc.jti": "\(Printable.safe(item.jti))", "risc.error": "\(error)"])
        } else if delay == nil {
            logger.warning("SET dead-lettered after \(attempt) attempts", metadata: ["risc.jti": "\(item.jti)"])
        }
        log.record(record)
    }

    /// The claims of a stored (already verified) compact SET.
    static func token(from compact: String) throws -> SecurityEventToken {
        try SecurityEventToken(payload: CompactJWS(compact).payload)
    }
}
