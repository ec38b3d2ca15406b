public import CoreMetrics
import Foundation
public import Prometheus
public import RISCCore
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
        "risc_push_requests_refused_total":
            "Requests to the public listener for a path it does not serve (not_found) or with a method the path does not take (method_not_allowed): scanners, mostly; not SETs.",
        "risc_push_connections_overflowed_total": "Connections closed for pipelining more requests than they read answers for.",
        "risc_tls_certificate_expiry_timestamp_seconds": "When a listener's certificate expires (notAfter, Unix time): public, admin.",
        "risc_store_up": "1 when the store took a write at its last health sample (every second), else 0.",
        "risc_queue_depth": "SETs stored and not yet processed.",
        "risc_queue_dead": "Dead letters: SETs whose actions failed for the whole retry window (risc queue list --dead).",
        "risc_queue_retrying": "SETs whose actions failed and wait for another attempt (cause: risc queue status, last_retry_error).",
        "risc_queue_oldest_pending_age_seconds": "Age of the oldest SET waiting for its actions (0 when none).",
        "risc_last_set_age_seconds": "Seconds since the last SET arrived (valid or duplicate).",
        "risc_jwks_usable": "1 when a usable key set is loaded.",
        "risc_notice_keys_ok": "0 while the unlink-notice key directory does not load (its last good keys still sign), else 1.",
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
    static let noticeOutcomes = ["published", "failed", "dead_lettered", "refused"]
    static let requestRefusals = ["not_found", "method_not_allowed"]

    let factory: any MetricsFactory
    /// The registry `/metrics` renders: set when the factory is risc's own Prometheus one.
    public let registry: PrometheusCollectorRegistry?

    /// Instruments by label and dimensions, each made once (a lookup under a lock per
    /// observation, not a factory call).
    private struct Instruments {
        var counters: [[String]: CoreMetrics.Counter] = [:]
        var gauges: [[String]: CoreMetrics.Gauge] = [:]
        /// What cumulative sources (key-set cache, store writes) last reported, for the counters' increments.
        var reported: [[String]: Int] = [:]
    }
    private let instruments = Mutex(Instruments())
    /// `risc_sets_total` by outcome and error, apart: it is counted for every request, and a
    /// lookup by this key costs half what building the general key does.
    private struct SetKey: Hashable {
        let outcome: String
        let err: String?
    }
    private let sets = Mutex<[SetKey: CoreMetrics.Counter]>([:])
    private let verifyTimer: CoreMetrics.Timer
    private let commitTimer: CoreMetrics.Timer
    private let openConnections: CoreMetrics.Meter
    private let overflowed: CoreMetrics.Counter
    /// Where actions go (`accounts` or `webhook`): the `target` label of the action series.
    let actionTarget: String
    /// `risc_actions_total` by outcome and `risc_action_duration_seconds` for `actionTarget`, made
    /// once: the store's writer counts every SET's actions (a general lookup built five strings).
    private let actionCounters: [(outcome: EventLogRecord.Outcome, counter: CoreMetrics.Counter)]
    private let actionTimer: CoreMetrics.Timer
    /// Each HTTPS listener's (`public`, `admin`) certificate's notAfter, seconds since the epoch
    /// (also for `/readyz`).
    let certificateExpiries = Mutex<[String: Double]>([:])

    /// `factory` nil: a new `PrometheusCollectorRegistry` through `RiscPrometheusFactory`.
    /// `version` and `commit` label `risc_build_info`; `actionTarget` (`accounts` or `webhook`)
    /// says which action series start at 0 (the notice series always do).
    public init(factory: (any MetricsFactory)? = nil, version: String = "unknown", commit: String = "unknown", actionTarget: String = "accounts") {
        self.actionTarget = actionTarget
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
        actionCounters = EventLogRecord.Outcome.actionOutcomes.map { outcome in
            (outcome, CoreMetrics.Counter(label: "risc_actions_total", dimensions: Self.actionDimensions(actionTarget, outcome), factory: factory))
        }
        actionTimer = CoreMetrics.Timer(label: "risc_action_duration_seconds", dimensions: [("target", actionTarget)], factory: factory)
        for outcome in Self.setOutcomes { _ = setCounter(SetKey(outcome: outcome, err: nil)) }
        for code in SETError.Code.all { _ = setCounter(SetKey(outcome: "rejected", err: code.rawValue)) }
        for outcome in Self.noticeOutcomes { _ = counter("risc_notices_total", [("outcome", outcome)]) }
        for reason in PushEndpoint.Refusal.allCases { _ = counter("risc_push_connections_refused_total", [("reason", reason.rawValue)]) }
        for reason in Self.requestRefusals { _ = counter("risc_push_requests_refused_total", [("reason", reason)]) }
        gauge("risc_build_info", 1, [("version", version), ("commit", commit)])
        openConnections.set(0)
        gauge("risc_push_connections_limit", 0)
    }

    public func observe(outcome: String, err: String?, verifySeconds: Double?, commitSeconds: Double?) {
        let key = SetKey(outcome: outcome, err: err)
        (sets.withLock { $0[key] } ?? setCounter(key)).increment()
        if let verifySeconds { verifyTimer.recordSeconds(verifySeconds) }
        if let commitSeconds { commitTimer.recordSeconds(commitSeconds) }
    }

    private func setCounter(_ key: SetKey) -> CoreMetrics.Counter {
        let counter = counter("risc_sets_total", key.err.map { [("outcome", key.outcome), ("err", $0)] } ?? [("outcome", key.outcome)])
        sets.withLock { $0[key] = counter }
        return counter
    }

    /// One action attempt (a SET's actions applied, or its webhook delivery), as its worker or store decided it.
    public func observeAction(outcome: EventLogRecord.Outcome, seconds: Double?) {
        let made = actionCounters.first { $0.outcome == outcome }?.counter
        (made ?? counter("risc_actions_total", Self.actionDimensions(actionTarget, outcome))).increment()
        if let seconds { actionTimer.recordSeconds(seconds) }
    }

    private static func actionDimensions(_ target: String, _ outcome: EventLogRecord.Outcome) -> [(String, String)] {
        [("target", target), ("outcome", outcome.rawValue)]
    }

    /// One unlink-notice publish attempt (`refused`: a queued row risc did not make, dead-lettered).
    public func observeNotice(outcome: EventLogRecord.Outcome, refused: Bool) {
        counter("risc_notices_total", [("outcome", refused ? "refused" : outcome.rawValue)]).increment()
    }

    // The public listener's connections.
    func setConnectionLimit(_ limit: Int) { gauge("risc_push_connections_limit", Double(limit)) }
    func connectionOpened() { openConnections.increment() }
    func connectionClosed() { openConnections.decrement() }
    func connectionOverflowed() { overflowed.increment() }
    func requestRefused(_ reason: String) { counter("risc_push_requests_refused_total", [("reason", reason)]).increment() }
    func connectionRefused(_ reason: PushEndpoint.Refusal) { counter("risc_push_connections_refused_total", [("reason", reason.rawValue)]).increment() }

    func noteCertificate(listener: String, notValidAfter: Double) {
        certificateExpiries.withLock { $0[listener] = notValidAfter }
        gauge("risc_tls_certificate_expiry_timestamp_seconds", notValidAfter, [("listener", listener)])
    }

    /// Sets a gauge.
    func gauge(_ label: String, _ value: Double, _ dimensions: [(String, String)] = []) {
        instrument(\.gauges, label, dimensions) { CoreMetrics.Gauge(label: label, dimensions: dimensions, factory: factory) }.record(value)
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        instrument(\.counters, label, dimensions) { CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory) }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> [String] { [label] + dimensions.flatMap { [$0.0, $0.1] } }

    /// The instrument for `label` and `dimensions`, made by `make` the first time.
    private func instrument<Instrument: Sendable>(
        _ made: WritableKeyPath<Instruments, [[String]: Instrument]>, _ label: String, _ dimensions: [(String, String)],
        make: () -> Instrument
    ) -> Instrument {
        let key = Self.key(label, dimensions)
        return instruments.withLock { instruments in
            if let existing = instruments[keyPath: made][key] { return existing }
            let instrument = make()
            instruments[keyPath: made][key] = instrument
            return instrument
        }
    }

    /// A counter kept by someone else as a running total (the key-set cache's decisions, the
    /// store's commits): increments it by what the total grew since the last report.
    func report(total: Int, _ label: String, _ dimensions: [(String, String)] = []) {
        let key = Self.key(label, dimensions)
        let grown = instruments.withLock { made in
            let grown = max(0, total - made.reported[key, default: 0])
            made.reported[key] = max(total, made.reported[key, default: 0])
            return grown
        }
        counter(label, dimensions).increment(by: grown)
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
