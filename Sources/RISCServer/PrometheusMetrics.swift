import Foundation
import RISCCore
import Synchronization

/// The receiver's metrics in Prometheus text format (exposition format 0.0.4).
///
/// Labels are bounded: outcomes and RFC 8935 codes only, never `kid`, `jti`, `sub`, `iss` or paths.
public final class PrometheusMetrics: IntakeMetrics, Sendable {
    struct Histogram {
        /// Intake: verify and commit take microseconds to milliseconds.
        static let intakeBounds: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
        /// Actions: a store transaction, or a webhook call up to its timeout.
        static let actionBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
        let bounds: [Double]
        var buckets: [Int]
        var count = 0
        var sum = 0.0
        init(bounds: [Double] = Histogram.intakeBounds) {
            self.bounds = bounds
            buckets = [Int](repeating: 0, count: bounds.count)
        }
        mutating func observe(_ value: Double) {
            count += 1
            sum += value
            for (index, bound) in bounds.enumerated() where value <= bound { buckets[index] += 1 }
        }
    }

    /// Outcomes every labelled series starts with at 0, so a counter exists from the first scrape
    /// after a start (a rate over a restart, and an alert on `increase(...) > 0`, need the zero).
    static let setOutcomes = ["accepted", "duplicate", "failed", "limited", "malformed", "too_large"]
    static let actionOutcomes = ["applied", "failed", "dead_lettered", "lease_lost", "deferred"]
    static let noticeOutcomes = ["published", "failed", "dead_lettered"]

    struct Key: Hashable, Comparable {
        let outcome: String
        let err: String?
        static func < (a: Key, b: Key) -> Bool { (a.outcome, a.err ?? "") < (b.outcome, b.err ?? "") }
    }

    struct ActionKey: Hashable, Comparable {
        /// `accounts` or `webhook`.
        let target: String
        let outcome: String
        static func < (a: ActionKey, b: ActionKey) -> Bool { (a.target, a.outcome) < (b.target, b.outcome) }
    }

    struct State {
        var requests: [Key: Int] = [:]
        var verify = Histogram()
        var commit = Histogram()
        var actions: [ActionKey: Int] = [:]
        /// By target.
        var actionDurations: [String: Histogram] = [:]
        var notices: [String: Int] = [:]
    }

    private let state = Mutex(State())
    /// `risc_build_info`'s labels.
    let build: (version: String, commit: String)
    /// The public listener's connections: open now, the limit in force, and those closed for
    /// being over it.
    let openConnections = Atomic<Int>(0)
    let connectionLimit = Atomic<Int>(0)
    /// Each HTTPS listener's (`public`, `admin`) certificate's notAfter, seconds since the epoch.
    let certificateExpiries = Mutex<[String: Double]>([:])
    func noteCertificate(listener: String, notValidAfter: Double) {
        certificateExpiries.withLock { $0[listener] = notValidAfter }
    }
    /// By `PushEndpoint.Refusal` raw value.
    let refusedConnections = Mutex<[String: Int]>([:])
    /// Connections closed for having more pipelined requests waiting than their bound (clients
    /// that do not read their answers).
    let overflowedConnections = Atomic<Int>(0)

    /// `version` and `commit` label `risc_build_info`; `actionTarget` (`accounts` or `webhook`)
    /// says which action series to start at 0 (the notice series always do).
    public init(version: String = "unknown", commit: String = "unknown", actionTarget: String = "accounts") {
        build = (version, commit)
        state.withLock { state in
            for outcome in Self.setOutcomes { state.requests[Key(outcome: outcome, err: nil)] = 0 }
            for code in SETError.Code.all { state.requests[Key(outcome: "rejected", err: code.rawValue)] = 0 }
            for outcome in Self.actionOutcomes { state.actions[ActionKey(target: actionTarget, outcome: outcome)] = 0 }
            state.actionDurations[actionTarget] = Histogram(bounds: Histogram.actionBounds)
            for outcome in Self.noticeOutcomes { state.notices[outcome] = 0 }
        }
    }

    /// One action attempt (a SET's actions applied, or its webhook delivery), from the event log.
    func observeAction(target: String, outcome: String, seconds: Double?) {
        state.withLock { state in
            state.actions[ActionKey(target: target, outcome: outcome), default: 0] += 1
            if let seconds { state.actionDurations[target, default: Histogram(bounds: Histogram.actionBounds)].observe(seconds) }
        }
    }

    /// One unlink-notice publish attempt.
    func observeNotice(outcome: String) {
        state.withLock { state in state.notices[outcome, default: 0] += 1 }
    }

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
        func histogram(_ name: String, _ help: String, _ series: [(labels: String, histogram: Histogram)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for (labels, h) in series {
                let prefix = labels.isEmpty ? "" : labels + ","
                for (index, bound) in h.bounds.enumerated() { out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(h.buckets[index])\n" }
                let braces = labels.isEmpty ? "" : "{\(labels)}"
                out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(h.count)\n\(name)_sum\(braces) \(h.sum)\n\(name)_count\(braces) \(h.count)\n"
            }
        }
        histogram("risc_verify_duration_seconds", "Time to verify a SET (parse, key, signature, claims).", [("", snapshot.verify)])
        histogram("risc_commit_duration_seconds", "Time from verified to durably stored (group commit).", [("", snapshot.commit)])
        out += "# HELP risc_actions_total Action attempts for stored SETs, by target (accounts or webhook) and outcome.\n# TYPE risc_actions_total counter\n"
        for (key, value) in snapshot.actions.sorted(by: { $0.key < $1.key }) {
            out += "risc_actions_total{target=\"\(key.target)\",outcome=\"\(key.outcome)\"} \(value)\n"
        }
        histogram(
            "risc_action_duration_seconds", "Time one action attempt took (a store transaction or a webhook call).",
            snapshot.actionDurations.sorted { $0.key < $1.key }.map { ("target=\"\($0.key)\"", $0.value) })
        out += "# HELP risc_notices_total Unlink-notice publish attempts to Google, by outcome.\n# TYPE risc_notices_total counter\n"
        for (outcome, value) in snapshot.notices.sorted(by: { $0.key < $1.key }) { out += "risc_notices_total{outcome=\"\(outcome)\"} \(value)\n" }
        out += "# HELP risc_build_info The running release and the commit it was built from (always 1).\n# TYPE risc_build_info gauge\n"
        out += "risc_build_info{version=\"\(Self.labelValue(build.version))\",commit=\"\(Self.labelValue(build.commit))\"} 1\n"
        out += ProcessMetrics.render()
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
        for (listener, expiry) in certificateExpiries.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            gauges.append((
                "risc_tls_certificate_expiry_timestamp_seconds{listener=\"\(listener)\"}",
                "When a listener's certificate expires (notAfter, Unix time): public, admin.", expiry))
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
            // A labelled gauge's name carries its labels: HELP and TYPE once per metric.
            let name = gauge.name.prefix { $0 != "{" }
            if typed.insert(String(name)).inserted { out += "# HELP \(name) \(gauge.help)\n# TYPE \(name) gauge\n" }
            out += "\(gauge.name) \(Self.format(gauge.value))\n"
        }
        return out
    }

    /// A label value with `\`, `"` and newlines escaped (exposition format).
    static func labelValue(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
