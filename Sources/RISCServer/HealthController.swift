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
    let store: any StoreHealth
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

    /// How long `/readyz` waits for the store: a probe times out after a few seconds, so an
    /// answer that waits for a store that is down must come before (it took 6 s with PostgreSQL
    /// down: the write check's 2 s, then the queue depth and the last SET each waited their own).
    static let storeDeadline = 1.5

    /// Ready only when a usable key set is loaded and the store takes writes. The store's three
    /// questions are asked at once and given `storeDeadline` together; what has not answered by
    /// then reads as unknown (`queue_depth` -1) and not writable.
    func readiness() async -> Response {
        let keySet = await keys.status()
        let store = self.store
        async let writability = store.writability(within: Self.storeDeadline)
        async let counted = try? withDeadline(Self.storeDeadline, "queue depth") { try await store.queueDepth() }
        async let latest = try? withDeadline(Self.storeDeadline, "last SET") { try await store.lastReceivedAt() }
        let (writable, why) = await writability
        let depth = await counted ?? -1
        let last = await latest ?? nil
        var keyObject = JSONObject()
        keyObject["usable"] = .bool(keySet.usable)
        keyObject["source"] = .string(keySet.source)
        if let age = keySet.age { keyObject["age_seconds"] = .number(age.rounded()) }
        if let issuer = keySet.issuer { keyObject["issuer"] = .string(issuer) }
        keyObject["kids"] = .array(keySet.keyIDs.map { .string($0) })
        if let error = keySet.lastError { keyObject["last_error"] = .string(error) }
        var body = JSONObject()
        body["ready"] = .bool(keySet.usable && writable)
        body["key_set"] = .object(keyObject)
        var storeObject: JSONObject = ["backend": .string(backend), "writable": .bool(writable), "queue_depth": .number(Double(depth))]
        if let why { storeObject["error"] = .string(Printable.safe(why, maxBytes: 300)) }
        body["store"] = .object(storeObject)
        if let last = last ?? nil { body["last_set_at"] = .string(Timestamp.iso8601(last)) }
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

    /// Prometheus text of the metrics as they are now (sampled first); 404 when the receiver's
    /// metrics go to another swift-metrics backend.
    func scrape() async -> Response {
        await MetricsSampler(keys: keys, store: store, metrics: metrics, noticeKeys: noticeKeys).sample()
        guard let text = metrics.exposition() else {
            return Responses.json(#"{"error":"metrics go to the embedding program's swift-metrics backend"}"#, status: .notFound)
        }
        return Responses.text(String(decoding: text, as: UTF8.self), contentType: "text/plain; version=0.0.4")
    }
}

/// Reads what the metrics show of the store and the keys (queue depth, dead letters, the key
/// set's age, the running totals of fetches and commits) into the metrics: before each scrape, and
/// every `interval` for backends that are not scraped (`MetricsSamplerService`).
struct MetricsSampler: Sendable {
    let keys: KeySetSource
    let store: any StoreHealth
    let metrics: ReceiverMetrics
    var noticeKeys: TransmitterKeyCache? = nil

    func sample() async {
        let keySet = await keys.status()
        let now = Date().timeIntervalSince1970
        metrics.gauge("risc_jwks_usable", keySet.usable ? 1 : 0)
        if let noticeKeys { metrics.gauge("risc_notice_keys_ok", noticeKeys.problem() == nil ? 1 : 0) }
        if let age = keySet.age { metrics.gauge("risc_jwks_age_seconds", age) }
        for (result, total) in keySet.counters { metrics.report(total: total, "risc_jwks_fetches_total", [("result", result)]) }
        if let depth = try? await store.queueDepth() { metrics.gauge("risc_queue_depth", Double(depth)) }
        if let dead = try? await store.deadLetters() { metrics.gauge("risc_queue_dead", Double(dead)) }
        if let retrying = try? await store.retrying() { metrics.gauge("risc_queue_retrying", Double(retrying)) }
        do {
            let oldest = try await store.oldestPendingReceivedAt()
            metrics.gauge("risc_queue_oldest_pending_age_seconds", oldest.map { max(0, now - $0) } ?? 0)
        } catch {}  // the store is away: the gauge keeps its last value, /readyz says why
        if let last = (try? await store.lastReceivedAt()) ?? nil { metrics.gauge("risc_last_set_age_seconds", max(0, now - last)) }
        let writes = store.writeCounts
        metrics.report(total: writes.commits, "risc_store_commits_total")
        metrics.report(total: writes.rows, "risc_store_rows_total")
    }
}

/// Samples every `interval` seconds, for a swift-metrics backend that is not scraped.
struct MetricsSamplerService: Service {
    let sampler: MetricsSampler
    let interval: Double

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sampler.sample()
                try? await Task.sleep(for: .seconds(interval))
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

    static func pinned(_ provider: StaticKeyProvider) -> KeySetSource {
        KeySetSource {
            Status(usable: true, source: "pinned", age: nil, issuer: provider.issuer, keyIDs: provider.keys.keyIDs, lastError: nil, counters: [])
        }
    }
}
