import Foundation
import RISCCore
import Synchronization

/// The receiver's metrics in Prometheus text format (exposition format 0.0.4).
///
/// Labels are bounded: outcomes and RFC 8935 codes only, never `kid`, `jti`, `sub`, `iss` or paths.
public final class PrometheusMetrics: IntakeMetrics, Sendable {
    struct Histogram {
        static let bounds: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
        var buckets = [Int](repeating: 0, count: Histogram.bounds.count)
        var count = 0
        var sum = 0.0
        mutating func observe(_ value: Double) {
            count += 1
            sum += value
            for (index, bound) in Histogram.bounds.enumerated() where value <= bound { buckets[index] += 1 }
        }
    }

    struct Key: Hashable, Comparable {
        let outcome: String
        let err: String?
        static func < (a: Key, b: Key) -> Bool { (a.outcome, a.err ?? "") < (b.outcome, b.err ?? "") }
    }

    struct State {
        var requests: [Key: Int] = [:]
        var verify = Histogram()
        var commit = Histogram()
    }

    private let state = Mutex(State())
    /// The public listener's connections: open now, the limit in force, and those closed for
    /// being over it.
    let openConnections = Atomic<Int>(0)
    let connectionLimit = Atomic<Int>(0)
    /// The public listener's certificate's notAfter (seconds since the epoch; 0 without TLS).
    let tlsNotValidAfter = Atomic<Int>(0)
    /// `tlsNotValidAfter`, or nil when the listener serves plain HTTP.
    var tlsExpiry: Double? {
        let notAfter = tlsNotValidAfter.load(ordering: .relaxed)
        return notAfter > 0 ? Double(notAfter) : nil
    }
    /// By `PushEndpoint.Refusal` raw value.
    let refusedConnections = Mutex<[String: Int]>([:])
    /// Connections closed for having more pipelined requests waiting than their bound (clients
    /// that do not read their answers).
    let overflowedConnections = Atomic<Int>(0)

    public init() {}

    public func observe(outcome: String, err: String?, verifySeconds: Double?, commitSeconds: Double?) {
        state.withLock { state in
            state.requests[Key(outcome: outcome, err: err), default: 0] += 1
            if let verifySeconds { state.verify.observe(verifySeconds) }
            if let commitSeconds { state.commit.observe(commitSeconds) }
        }
    }

    /// Renders every metric; `gauges` and `counters` add values read at scrape time.
    public func render(gauges: [(name: String, help: String, value: Double)], counters: [(name: String, help: String, labels: String, value: Double)]) -> String {
        let snapshot = state.withLock { $0 }
        var out = ""
        out += "# HELP risc_sets_total SETs received, by outcome and RFC 8935 error code.\n# TYPE risc_sets_total counter\n"
        for (key, value) in snapshot.requests.sorted(by: { $0.key < $1.key }) {
            let err = key.err.map { ",err=\"\($0)\"" } ?? ""
            out += "risc_sets_total{outcome=\"\(key.outcome)\"\(err)} \(value)\n"
        }
        func histogram(_ name: String, _ help: String, _ h: Histogram) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for (index, bound) in Histogram.bounds.enumerated() { out += "\(name)_bucket{le=\"\(bound)\"} \(h.buckets[index])\n" }
            out += "\(name)_bucket{le=\"+Inf\"} \(h.count)\n\(name)_sum \(h.sum)\n\(name)_count \(h.count)\n"
        }
        histogram("risc_verify_duration_seconds", "Time to verify a SET (parse, key, signature, claims).", snapshot.verify)
        histogram("risc_commit_duration_seconds", "Time from verified to durably stored (group commit).", snapshot.commit)
        var counters = counters, gauges = gauges
        let refused = refusedConnections.withLock { $0 }
        for reason in PushEndpoint.Refusal.allCases.map(\.rawValue) {
            let count = refused[reason, default: 0]
            counters.append((
                name: "risc_push_connections_refused_total", help: "Connections closed on accept, by the limit they were over.",
                labels: "reason=\"\(reason)\"", value: Double(count)))
        }
        counters.append((
            name: "risc_push_connections_overflowed_total",
            help: "Connections closed for pipelining more requests than they read answers for.", labels: "",
            value: Double(overflowedConnections.load(ordering: .relaxed))))
        if let tlsExpiry {
            gauges.append((
                "risc_tls_certificate_expiry_timestamp_seconds", "When the public listener's certificate expires (notAfter, Unix time).",
                tlsExpiry))
        }
        gauges.append(("risc_push_connections", "Connections open on the public listener.", Double(openConnections.load(ordering: .relaxed))))
        gauges.append(("risc_push_connections_limit", "Connections the public listener holds at most.", Double(connectionLimit.load(ordering: .relaxed))))
        var typed = Set<String>()
        for counter in counters {
            if typed.insert(counter.name).inserted {
                out += "# HELP \(counter.name) \(counter.help)\n# TYPE \(counter.name) counter\n"
            }
            out += "\(counter.name)\(counter.labels.isEmpty ? "" : "{\(counter.labels)}") \(Self.format(counter.value))\n"
        }
        for gauge in gauges {
            out += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) gauge\n\(gauge.name) \(Self.format(gauge.value))\n"
        }
        return out
    }

    static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
