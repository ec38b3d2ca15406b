import Foundation
import Hummingbird
import NIOCore
import RISCClient
import RISCCore
import RISCStore
import Synchronization

/// The admin listener's `/healthz`, `/readyz` and `/metrics`.
struct HealthController: Sendable {
    let keys: KeySetSource
    let store: any StoreHealth
    /// `embedded` or `postgresql`.
    let backend: String
    let metrics: PrometheusMetrics

    func register(on router: Router<RISCRequestContext>) {
        router.get("/healthz") { _, _ in Responses.json(#"{"status":"ok"}"#, status: .ok) }
        router.get("/readyz") { _, _ in await readiness() }
        router.get("/metrics") { _, _ in await scrape() }
    }

    /// Ready only when a usable key set is loaded and the store takes writes.
    func readiness() async -> Response {
        let keySet = await keys.status()
        let (writable, why) = await store.writability()
        let depth = (try? await store.queueDepth()) ?? -1
        let last = try? await store.lastReceivedAt()
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
        return Responses.json(JSONValue.object(body).serialized, status: keySet.usable && writable ? .ok : .serviceUnavailable)
    }

    func scrape() async -> Response {
        let keySet = await keys.status()
        let depth = (try? await store.queueDepth()) ?? 0
        let dead = (try? await store.deadLetters()) ?? 0
        let retrying = (try? await store.retrying()) ?? 0
        let oldest = (try? await store.oldestPendingReceivedAt()) ?? nil
        let lastSET = (try? await store.lastReceivedAt()) ?? nil
        var gauges: [(name: String, help: String, value: Double)] = [
            ("risc_queue_depth", "SETs stored and not yet processed.", Double(depth)),
            ("risc_jwks_usable", "1 when a usable key set is loaded.", keySet.usable ? 1 : 0),
        ]
        if let age = keySet.age { gauges.append(("risc_jwks_age_seconds", "Seconds since the key set was fetched or revalidated.", age)) }
        let now = Date().timeIntervalSince1970
        gauges.append(("risc_queue_dead", "Dead letters: SETs whose actions failed for the whole retry window (risc queue list --dead).", Double(dead)))
        gauges.append((
            "risc_queue_retrying", "SETs whose actions failed and wait for another attempt (cause: risc queue status, last_retry_error).",
            Double(retrying)))
        gauges.append((
            "risc_queue_oldest_pending_age_seconds", "Age of the oldest SET waiting for its actions (0 when none).",
            oldest.map { max(0, now - $0) } ?? 0
        ))
        if let last = lastSET {
            gauges.append(("risc_last_set_age_seconds", "Seconds since the last SET arrived (valid or duplicate).", max(0, now - last)))
        }
        var counters = keySet.counters.map { (name: "risc_jwks_fetches_total", help: "Key-set cache decisions, by result.", labels: "result=\"\($0.0)\"", value: Double($0.1)) }
        let writes = store.writeCounts
        counters.append((name: "risc_store_commits_total", help: "Store transactions committed (one fsync each).", labels: "", value: Double(writes.commits)))
        counters.append((name: "risc_store_rows_total", help: "SET rows written by those commits.", labels: "", value: Double(writes.rows)))
        return Responses.text(metrics.render(gauges: gauges, counters: counters), contentType: "text/plain; version=0.0.4")
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
