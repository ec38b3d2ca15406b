import Foundation
import Hummingbird
import NIOCore
import RISCClient
import RISCCore
import ServiceLifecycle
import Synchronization

/// The admin listener's `/healthz`, `/readyz` and `/metrics`.
struct HealthController: Sendable {
    let keys: KeySetSource
    /// The store as last sampled: `/readyz` and `/metrics` answer from it at once.
    let store: StoreSampler
    /// `embedded` or `postgresql`.
    let backend: String
    let metrics: ReceiverMetrics
    /// The unlink-notice keys, when notices are on.
    var noticeKeys: TransmitterKeyCache? = nil

    func register(on router: Router<RISCRequestContext>) {
        router.get("/healthz") { _, _ in Responses.json(#"{"status":"ok"}"#, status: .ok) }
        router.get("/readyz") { _, _ in await readiness() }
        router.get("/metrics") { _, _ in await scrape() }
    }

    /// Ready only when a usable key set is loaded and the store took a write at its last sample
    /// (`StoreSampler`): answered at once, whether the store is there or not. What the store could
    /// not say is `null` (unknown), not a number.
    func readiness() async -> Response {
        let keySet = await keys.status()
        let sample = store.current
        let writable = sample.writable == true
        func object(_ keySet: KeySetSource.Status) -> JSONValue {
            var keyObject = JSONObject()
            keyObject["usable"] = .bool(keySet.usable)
            keyObject["source"] = .string(keySet.source)
            if let age = keySet.age { keyObject["age_seconds"] = .number(age.rounded()) }
            if let issuer = keySet.issuer { keyObject["issuer"] = .string(issuer) }
            keyObject["kids"] = .array(keySet.keyIDs.map { .string($0) })
            if let error = keySet.lastError { keyObject["last_error"] = .string(error) }
            return .object(keyObject)
        }
        var body = JSONObject()
        body["ready"] = .bool(keySet.usable && writable)
        // With several transmitters: the first one's (Google's) as before, and each by name.
        body["key_set"] = object(keySet.parts.first?.status ?? keySet)
        if !keySet.parts.isEmpty {
            var transmitters = JSONObject()
            for part in keySet.parts { transmitters[part.name] = object(part.status) }
            body["transmitters"] = .object(transmitters)
        }
        var storeObject: JSONObject = [
            "backend": .string(backend), "writable": sample.writable.map { .bool($0) } ?? .null,
            "queue_depth": sample.queueDepth.map { .number(Double($0)) } ?? .null,
        ]
        if let at = sample.at { storeObject["sampled_at"] = .string(Timestamp.iso8601(at)) }
        if let why = sample.reason { storeObject["error"] = .string(Printable.safe(why, maxBytes: 300)) }
        body["store"] = .object(storeObject)
        if let last = sample.lastReceivedAt ?? nil { body["last_set_at"] = .string(Timestamp.iso8601(last)) }
        // Informational: an expired certificate stops Google's deliveries, but not this process.
        let expiries = metrics.certificateExpiries.withLock { $0 }
        if let expiry = expiries["public"] { body["tls"] = .object(["not_after": .string(Timestamp.iso8601(expiry))]) }
        if let expiry = expiries["admin"] { body["admin_tls"] = .object(["not_after": .string(Timestamp.iso8601(expiry))]) }
        // Informational too: a broken key directory keeps signing with its last good keys.
        if let noticeKeys {
            var object: JSONObject = ["directory": .string(noticeKeys.directory)]
            let problem = noticeKeys.problem()
            object["ok"] = .bool(problem == nil)
            if let problem { object["error"] = .string(Printable.safe(problem, maxBytes: 300)) }
            body["notice_keys"] = .object(object)
        }
        return Responses.json(JSONValue.object(body).serialized, status: keySet.usable && writable ? .ok : .serviceUnavailable)
    }

    /// Prometheus text of the metrics as they are now (the keys and counts read first, the store's
    /// values from its last sample); 404 when the receiver's metrics go to another swift-metrics backend.
    func scrape() async -> Response {
        await MetricsSampler(keys: keys, store: store, metrics: metrics, noticeKeys: noticeKeys).sample()
        guard let text = metrics.exposition() else {
            return Responses.json(#"{"error":"metrics go to the embedding program's swift-metrics backend"}"#, status: .notFound)
        }
        return Responses.text(String(decoding: text, as: UTF8.self), contentType: "text/plain; version=0.0.4")
    }
}

/// Reads what the metrics show of the store (its last sample) and the keys (queue depth, dead
/// letters, the key set's age, the running totals of fetches and commits) into the metrics: before
/// each scrape, and after each of the store's samples (`HealthSamplerService`). A value the store
/// could not give is NaN, unknown, never a stale or made-up number; `risc_store_up` says whether it
/// took a write.
struct MetricsSampler: Sendable {
    let keys: KeySetSource
    let store: StoreSampler
    let metrics: ReceiverMetrics
    var noticeKeys: TransmitterKeyCache? = nil

    func sample() async {
        let keySet = await keys.status()
        let now = store.clock()
        metrics.gauge("risc_jwks_usable", keySet.allUsable ?? keySet.usable ? 1 : 0)
        if let noticeKeys { metrics.gauge("risc_notice_keys_ok", noticeKeys.problem() == nil ? 1 : 0) }
        if let age = keySet.age { metrics.gauge("risc_jwks_age_seconds", age) }
        for (result, total) in keySet.counters { metrics.report(total: total, "risc_jwks_fetches_total", [("result", result)]) }
        let sample = store.current
        metrics.gauge("risc_store_up", sample.writable == true ? 1 : 0)
        metrics.gauge("risc_queue_depth", sample.queueDepth.map(Double.init) ?? .nan)
        metrics.gauge("risc_queue_dead", sample.deadLetters.map(Double.init) ?? .nan)
        metrics.gauge("risc_queue_retrying", sample.retrying.map(Double.init) ?? .nan)
        metrics.gauge("risc_queue_oldest_pending_age_seconds", sample.oldestPendingReceivedAt.map { $0.map { max(0, now - $0) } ?? 0 } ?? .nan)
        if let last = sample.lastReceivedAt ?? nil { metrics.gauge("risc_last_set_age_seconds", max(0, now - last)) }
        let writes = store.store.writeCounts
        metrics.report(total: writes.commits, "risc_store_commits_total")
        metrics.report(total: writes.rows, "risc_store_rows_total")
    }
}

/// What the store said when last asked (`StoreSampler`).
struct StoreSample: Sendable {
    /// When, on the sampler's clock; nil: not asked yet.
    var at: Double?
    /// Whether it took a write; nil: unknown (not asked yet, or the last answer is too old).
    var writable: Bool?
    /// Why it is not writable, or why unknown.
    var reason: String? = "the store has not been asked yet"
    var queueDepth: Int?, deadLetters: Int?, retrying: Int?
    /// nil: unknown; `.some(nil)`: none.
    var oldestPendingReceivedAt: Double??, lastReceivedAt: Double??
}

/// Asks the store its health questions every `interval` seconds, in the background: the write
/// check and the figures (one question, `StoreHealth.figures`), each within `deadline`, so that
/// `/readyz` and `/metrics` answer at once from the last answers even while a database is away
/// (probes and scrapes time out after a few seconds and would pile up). An answer older than
/// three intervals, the deadline and 5 s (a sampler that stopped) counts as unknown.
/// A count reads every row it counts, so a long queue (or many dead letters) is counted again
/// only every `longCountInterval`: the queue's depth and retries once it held `longCount` SETs,
/// the dead letters once there were as many. Time is the injected `clock`.
final class StoreSampler: Sendable {
    let store: any StoreHealth
    let interval: Double
    let deadline: Double
    let clock: @Sendable () -> Double
    private let latest = Mutex(StoreSample())

    static let longCount = 10_000
    static let longCountInterval: Double = 30

    /// The counts of a long queue or of many dead letters, and when they were asked.
    private struct LongCounts {
        var queue: (at: Double, depth: Int, retrying: Int)?
        var dead: (at: Double, count: Int)?
    }
    private let longCounts = Mutex(LongCounts())

    init(store: any StoreHealth, interval: Double, clock: @escaping @Sendable () -> Double = systemNow) {
        self.store = store
        self.interval = interval
        deadline = min(max(interval, 0.5), 2)
        self.clock = clock
    }

    /// When the last sample was taken (the next is due an interval after it).
    var lastSampled: Double? { latest.withLock { $0.at } }

    /// The last answers, or unknown when they are too old.
    var current: StoreSample {
        let sample = latest.withLock { $0 }
        guard let at = sample.at else { return sample }
        let age = clock() - at
        guard age > 3 * interval + deadline + 5 else { return sample }
        return StoreSample(at: at, reason: "the store's last answer is \(Int(age)) s old")
    }

    /// Asks the questions at once; what has not answered within `deadline` is unknown.
    func sample() async {
        let store = self.store
        let start = clock()
        let recent = { (at: Double) in !hasPassed(Self.longCountInterval, since: at, now: start) }
        let (queue, dead) = longCounts.withLock { ($0.queue.flatMap { recent($0.at) ? $0 : nil }, $0.dead.flatMap { recent($0.at) ? $0 : nil }) }
        async let writability = store.writability(within: deadline)
        // One question for the figures (a database server: one statement on one connection, not
        // five at once, each taking a connection of the pool while SETs are being committed).
        async let figures = answer("health figures") { try await store.figures(queueCounts: queue == nil, deadLetters: dead == nil) }
        let (writable, reason) = await writability
        let read = await figures ?? StoreFigures()
        let sample = StoreSample(
            at: clock(), writable: writable, reason: reason, queueDepth: queue?.depth ?? read.queueDepth,
            deadLetters: dead?.count ?? read.deadLetters, retrying: queue?.retrying ?? read.retrying,
            oldestPendingReceivedAt: read.oldestPendingReceivedAt, lastReceivedAt: read.lastReceivedAt)
        longCounts.withLock { counts in
            if queue == nil, let depth = sample.queueDepth, let retrying = sample.retrying {
                counts.queue = depth >= Self.longCount ? (start, depth, retrying) : nil
            }
            if dead == nil, let count = sample.deadLetters { counts.dead = count >= Self.longCount ? (start, count) : nil }
        }
        latest.withLock { $0 = sample }
    }

    /// The store's answer, nil when it gave none within the deadline.
    private func answer<T: Sendable>(_ what: String, _ question: @escaping @Sendable () async throws -> T) async -> T? {
        do { return try await withDeadline(deadline, what, clock: clock, question) } catch { return nil }
    }
}

/// Samples the store `interval` seconds of its clock after the last sample (the receiver took the
/// first before it started its services), and for a swift-metrics backend that is not scraped the metrics after
/// it (a scrape samples them itself).
struct HealthSamplerService: Service {
    let store: StoreSampler
    let metrics: MetricsSampler?

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await metrics?.sample()
                // An interval after the last sample, or from now if the clock stepped back since.
                let now = store.clock()
                await waitUntil(min(store.lastSampled ?? now, now) + store.interval, since: now, clock: store.clock)
                if Task.isCancelled { return }
                await store.sample()
            }
        }
    }
}

/// What `/readyz` and `/metrics` need to know about the keys, whatever their source.
struct KeySetSource: Sendable {
    struct Status: Sendable {
        let usable: Bool
        let source: String
        let age: Double?
        let issuer: String?
        let keyIDs: [String]
        let lastError: String?
        let counters: [(String, Int)]
        /// Every transmitter's key set usable (the same as `usable` with one transmitter).
        var allUsable: Bool? = nil
        /// With several transmitters, each one's status by name.
        var parts: [(name: String, status: Status)] = []
    }

    let status: @Sendable () async -> Status

    static func cache(_ cache: JWKSCache) -> KeySetSource {
        KeySetSource {
            let status = await cache.status()
            return Status(
                usable: status.usable, source: status.source?.rawValue ?? "none", age: status.age, issuer: status.issuer,
                keyIDs: status.keyIDs, lastError: status.lastError, counters: status.counters.all)
        }
    }

    /// Several transmitters' key sets: usable when any is (each transmitter's SETs are refused
    /// 503 while its own keys are not), the first one's details, counters summed, and each by name.
    static func combined(_ sources: [(String, KeySetSource)]) -> KeySetSource {
        KeySetSource {
            var parts: [(name: String, status: Status)] = []
            for (name, source) in sources { parts.append((name, await source.status())) }
            let first = parts[0].status
            var counters: [String: Int] = [:]
            for part in parts { for (result, total) in part.status.counters { counters[result, default: 0] += total } }
            return Status(
                usable: parts.contains { $0.status.usable }, source: first.source, age: parts.compactMap(\.status.age).max(), issuer: first.issuer,
                keyIDs: first.keyIDs, lastError: parts.lazy.compactMap { part in part.status.lastError.map { "\(part.name): \($0)" } }.first,
                counters: counters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, allUsable: parts.allSatisfy { $0.status.usable }, parts: parts)
        }
    }

    static func pinned(_ provider: StaticKeyProvider) -> KeySetSource {
        KeySetSource {
            Status(usable: true, source: "pinned", age: nil, issuer: provider.issuer, keyIDs: provider.keys.keyIDs, lastError: nil, counters: [])
        }
    }
}
