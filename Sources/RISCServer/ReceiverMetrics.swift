import CoreMetrics
import Foundation
import Prometheus
import RISCCore
import Synchronization

/// The receiver's metrics, on swift-metrics: every instrument is made by the `MetricsFactory` the
/// receiver was given, so a program embedding `Receiver` can send them to any swift-metrics
/// backend (OpenTelemetry, StatsD, several at once with `MultiplexMetricsHandler`). `risc serve`
/// uses `RiscPrometheusFactory`, whose registry `/metrics` renders.
///
/// Labels are bounded: outcomes and RFC 8935 codes only, never `kid`, `jti`, `sub`, `iss` or paths.
/// Every labelled series risc knows of is made at start, at 0, so a counter exists from the first
/// scrape after a start (a rate over a restart, and an alert on `increase(...) > 0`, need the zero).
public final class ReceiverMetrics: IntakeMetrics, Sendable {
    /// Each metric's description: the `# HELP` line of the Prometheus exposition.
    public static let descriptions: [String: String] = [
        "risc_sets_total": "SETs received, by outcome and RFC 8935 error code.",
        "risc_verify_duration_seconds": "Time to verify a SET (parse, key, signature, claims).",
        "risc_commit_duration_seconds": "Time from verified to durably stored (group commit).",
        "risc_actions_total": "Action attempts for stored SETs, by target (accounts or webhook) and outcome.",
        "risc_action_duration_seconds": "Time one action attempt took (a store transaction or a webhook call).",
        "risc_notices_total": "Unlink-notice publish attempts to Google, by outcome.",
        "risc_build_info": "The running release and the commit it was built from (always 1).",
        "risc_push_connections": "Connections open on the public listener.",
        "risc_push_connections_limit": "Connections the public listener holds at most.",
        "risc_push_connections_refused_total": "Connections closed on accept, by the limit they were over.",
        "risc_push_connections_overflowed_total": "Connections closed for pipelining more requests than they read answers for.",
        "risc_tls_certificate_expiry_timestamp_seconds": "When a listener's certificate expires (notAfter, Unix time): public, admin.",
        "risc_queue_depth": "SETs stored and not yet processed.",
        "risc_queue_dead": "Dead letters: SETs whose actions failed for the whole retry window (risc queue list --dead).",
        "risc_queue_retrying": "SETs whose actions failed and wait for another attempt (cause: risc queue status, last_retry_error).",
        "risc_queue_oldest_pending_age_seconds": "Age of the oldest SET waiting for its actions (0 when none).",
        "risc_last_set_age_seconds": "Seconds since the last SET arrived (valid or duplicate).",
        "risc_jwks_usable": "1 when a usable key set is loaded.",
        "risc_jwks_age_seconds": "Seconds since the key set was fetched or revalidated.",
        "risc_jwks_fetches_total": "Key-set cache decisions, by result.",
        "risc_store_commits_total": "Store transactions committed (one fsync each).",
        "risc_store_rows_total": "SET rows written by those commits.",
    ]

    /// Histogram buckets, in seconds, by metric.
    public static let buckets: [String: [Double]] = [
        // Intake: verify and commit take microseconds to milliseconds.
        "risc_verify_duration_seconds": intakeBounds,
        "risc_commit_duration_seconds": intakeBounds,
        // Actions: a store transaction, or a webhook call up to its timeout.
        "risc_action_duration_seconds": [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ]
    static let intakeBounds: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    static let setOutcomes = ["accepted", "duplicate", "failed", "limited", "malformed", "too_large"]
    static let actionOutcomes = ["applied", "failed", "dead_lettered", "lease_lost", "deferred"]
    static let noticeOutcomes = ["published", "failed", "dead_lettered"]

    let factory: any MetricsFactory
    /// The registry `/metrics` renders: set when the factory is risc's own Prometheus one.
    public let registry: PrometheusCollectorRegistry?

    /// Instruments by their dimensions, made once (a lookup under a lock per observation, not a
    /// factory call).
    private struct Instruments {
        var sets: [[String]: CoreMetrics.Counter] = [:]
        var actions: [[String]: CoreMetrics.Counter] = [:]
        var actionDurations: [String: CoreMetrics.Timer] = [:]
        var notices: [String: CoreMetrics.Counter] = [:]
        var gauges: [[String]: CoreMetrics.Gauge] = [:]
        var counters: [[String]: CoreMetrics.Counter] = [:]
        /// What cumulative sources (key-set cache, store writes) last reported, for the counters' increments.
        var reported: [[String]: Int] = [:]
    }
    private let instruments = Mutex(Instruments())
    private let verifyTimer: CoreMetrics.Timer
    private let commitTimer: CoreMetrics.Timer
    private let openConnections: CoreMetrics.Meter
    private let overflowed: CoreMetrics.Counter
    /// Each HTTPS listener's (`public`, `admin`) certificate's notAfter, seconds since the epoch
    /// (also for `/readyz`).
    let certificateExpiries = Mutex<[String: Double]>([:])

    /// `factory` nil: a new `PrometheusCollectorRegistry` through `RiscPrometheusFactory`.
    /// `version` and `commit` label `risc_build_info`; `actionTarget` (`accounts` or `webhook`)
    /// says which action series start at 0 (the notice series always do).
    public init(factory: (any MetricsFactory)? = nil, version: String = "unknown", commit: String = "unknown", actionTarget: String = "accounts") {
        if let factory {
            self.factory = factory
            registry = nil
        } else {
            let registry = PrometheusCollectorRegistry()
            self.factory = RiscPrometheusFactory(registry: registry)
            self.registry = registry
        }
        verifyTimer = CoreMetrics.Timer(label: "risc_verify_duration_seconds", factory: self.factory)
        commitTimer = CoreMetrics.Timer(label: "risc_commit_duration_seconds", factory: self.factory)
        openConnections = CoreMetrics.Meter(label: "risc_push_connections", factory: self.factory)
        overflowed = CoreMetrics.Counter(label: "risc_push_connections_overflowed_total", factory: self.factory)
        let factory = self.factory
        instruments.withLock { made in
            for outcome in Self.setOutcomes { made.sets[[outcome]] = CoreMetrics.Counter(label: "risc_sets_total", dimensions: [("outcome", outcome)], factory: factory) }
            for code in SETError.Code.all {
                made.sets[["rejected", code.rawValue]] = CoreMetrics.Counter(
                    label: "risc_sets_total", dimensions: [("outcome", "rejected"), ("err", code.rawValue)], factory: factory)
            }
            for outcome in Self.actionOutcomes {
                made.actions[[actionTarget, outcome]] = CoreMetrics.Counter(
                    label: "risc_actions_total", dimensions: [("target", actionTarget), ("outcome", outcome)], factory: factory)
            }
            made.actionDurations[actionTarget] = CoreMetrics.Timer(label: "risc_action_duration_seconds", dimensions: [("target", actionTarget)], factory: factory)
            for outcome in Self.noticeOutcomes { made.notices[outcome] = CoreMetrics.Counter(label: "risc_notices_total", dimensions: [("outcome", outcome)], factory: factory) }
            for reason in PushEndpoint.Refusal.allCases.map(\.rawValue) {
                made.counters[["risc_push_connections_refused_total", reason]] = CoreMetrics.Counter(
                    label: "risc_push_connections_refused_total", dimensions: [("reason", reason)], factory: factory)
            }
        }
        CoreMetrics.Gauge(label: "risc_build_info", dimensions: [("version", version), ("commit", commit)], factory: factory).record(1)
        openConnections.set(0)
        gauge("risc_push_connections_limit", 0)
    }

    public func observe(outcome: String, err: String?, verifySeconds: Double?, commitSeconds: Double?) {
        let key = err.map { [outcome, $0] } ?? [outcome]
        let counter = instruments.withLock { made in
            if let counter = made.sets[key] { return counter }
            let dimensions = err.map { [("outcome", outcome), ("err", $0)] } ?? [("outcome", outcome)]
            let counter = CoreMetrics.Counter(label: "risc_sets_total", dimensions: dimensions, factory: factory)
            made.sets[key] = counter
            return counter
        }
        counter.increment()
        if let verifySeconds { verifyTimer.recordSeconds(verifySeconds) }
        if let commitSeconds { commitTimer.recordSeconds(commitSeconds) }
    }

    /// One action attempt (a SET's actions applied, or its webhook delivery), from the event log.
    func observeAction(target: String, outcome: String, seconds: Double?) {
        let (counter, timer) = instruments.withLock { made in
            let counter = made.actions[[target, outcome]] ?? CoreMetrics.Counter(
                label: "risc_actions_total", dimensions: [("target", target), ("outcome", outcome)], factory: factory)
            made.actions[[target, outcome]] = counter
            let timer = made.actionDurations[target] ?? CoreMetrics.Timer(label: "risc_action_duration_seconds", dimensions: [("target", target)], factory: factory)
            made.actionDurations[target] = timer
            return (counter, timer)
        }
        counter.increment()
        if let seconds { timer.recordSeconds(seconds) }
    }

    /// One unlink-notice publish attempt.
    func observeNotice(outcome: String) {
        instruments.withLock { made in
            let counter = made.notices[outcome] ?? CoreMetrics.Counter(label: "risc_notices_total", dimensions: [("outcome", outcome)], factory: factory)
            made.notices[outcome] = counter
            return counter
        }.increment()
    }

    // The public listener's connections.
    func setConnectionLimit(_ limit: Int) { gauge("risc_push_connections_limit", Double(limit)) }
    func connectionOpened() { openConnections.increment() }
    func connectionClosed() { openConnections.decrement() }
    func connectionOverflowed() { overflowed.increment() }
    func connectionRefused(_ reason: PushEndpoint.Refusal) { counter("risc_push_connections_refused_total", [("reason", reason.rawValue)]).increment() }

    func noteCertificate(listener: String, notValidAfter: Double) {
        certificateExpiries.withLock { $0[listener] = notValidAfter }
        gauge("risc_tls_certificate_expiry_timestamp_seconds", notValidAfter, [("listener", listener)])
    }

    /// Sets a gauge (made on first use).
    func gauge(_ label: String, _ value: Double, _ dimensions: [(String, String)] = []) {
        let key = [label] + dimensions.flatMap { [$0.0, $0.1] }
        instruments.withLock { made in
            let gauge = made.gauges[key] ?? CoreMetrics.Gauge(label: label, dimensions: dimensions, factory: factory)
            made.gauges[key] = gauge
            return gauge
        }.record(value)
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        let key = [label] + dimensions.flatMap { [$0.0, $0.1] }
        return instruments.withLock { made in
            let counter = made.counters[key] ?? CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            made.counters[key] = counter
            return counter
        }
    }

    /// A counter kept by someone else as a running total (the key-set cache's decisions, the
    /// store's commits): increments it by what the total grew since the last report.
    func report(total: Int, _ label: String, _ dimensions: [(String, String)] = []) {
        let key = [label] + dimensions.flatMap { [$0.0, $0.1] }
        let counter = counter(label, dimensions)
        let grown = instruments.withLock { made in
            let grown = max(0, total - made.reported[key, default: 0])
            made.reported[key] = max(total, made.reported[key, default: 0])
            return grown
        }
        counter.increment(by: grown)
    }

    /// The Prometheus text of everything (exposition format 0.0.4) with the `process_*` metrics,
    /// or nil when the metrics go to another backend.
    func exposition() -> [UInt8]? {
        guard let registry else { return nil }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        buffer += ProcessMetrics.render().utf8
        return buffer
    }

    static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// swift-prometheus's registry behind swift-metrics, with risc's descriptions as `# HELP` lines
/// and its histogram buckets (swift-prometheus's own `PrometheusMetricsFactory` gives swift-metrics
/// instruments no help text, which `promtool check metrics` reports).
public struct RiscPrometheusFactory: MetricsFactory {
    public let registry: PrometheusCollectorRegistry

    public init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: ReceiverMetrics.descriptions[label] ?? "")
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        dimensions.isEmpty ? registry.makeCounter(descriptor: descriptor(label)) : registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        dimensions.isEmpty ? registry.makeCounter(descriptor: descriptor(label)) : registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            let buckets = ReceiverMetrics.buckets[label] ?? ReceiverMetrics.intakeBounds
            return dimensions.isEmpty
                ? registry.makeValueHistogram(descriptor: descriptor(label), buckets: buckets)
                : registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
        }
        return dimensions.isEmpty ? registry.makeGauge(descriptor: descriptor(label)) : registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        dimensions.isEmpty ? registry.makeGauge(descriptor: descriptor(label)) : registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let buckets = (ReceiverMetrics.buckets[label] ?? ReceiverMetrics.intakeBounds).map { Duration.nanoseconds(Int64(($0 * 1e9).rounded())) }
        return dimensions.isEmpty
            ? registry.makeDurationHistogram(descriptor: descriptor(label), buckets: buckets)
            : registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
    }

    public func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    public func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    public func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}
