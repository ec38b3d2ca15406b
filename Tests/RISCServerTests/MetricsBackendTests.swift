import CoreMetrics
import Foundation
import MetricsTestKit
import Prometheus
import RISCClient
import RISCCore
import RISCServer
import RISCTestKit
import Testing

/// The receiver's metrics go through swift-metrics: a program embedding `Receiver` passes its own
/// backend, here two at once (swift-prometheus's stock factory on a registry of the test's own,
/// and swift-metrics' in-memory TestMetrics) through `MultiplexMetricsHandler`.
@Suite("Metrics through another swift-metrics backend")
struct MetricsBackendTests {
    @Test("a receiver given a MetricsFactory counts SETs and samples the store into it; /metrics then answers 404")
    func otherBackend() async throws {
        let registry = PrometheusCollectorRegistry()
        let testMetrics = TestMetrics()
        let backend = MultiplexMetricsHandler(factories: [PrometheusMetricsFactory(registry: registry), testMetrics])
        let harness = try ServerHarness()
        harness.metricsFactory = backend
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "backend-1")).status == 202)
        #expect(try await harness.post(try harness.token(jti: "backend-1")).status == 202)
        #expect(try await harness.post("not a token").status == 400)

        #expect(try testMetrics.expectCounter("risc_sets_total", [("outcome", "accepted")]).totalValue == 1)
        #expect(try testMetrics.expectCounter("risc_sets_total", [("outcome", "duplicate")]).totalValue == 1)
        #expect(try testMetrics.expectCounter("risc_sets_total", [("outcome", "rejected"), ("err", "invalid_request")]).totalValue == 1)
        #expect(try testMetrics.expectCounter("risc_sets_total", [("outcome", "rejected"), ("err", "invalid_key")]).totalValue == 0)
        #expect(try testMetrics.expectTimer("risc_verify_duration_seconds").values.count == 3)
        #expect(try testMetrics.expectGauge("risc_build_info", [("version", "unknown"), ("commit", "unknown")]).lastValue == 1)
        // The sampler reads the store at start (then every 10 s): the gauges exist without a scrape.
        var sampled = false
        for _ in 0..<100 where !sampled {
            sampled = (try? testMetrics.expectGauge("risc_queue_depth")) != nil && (try? testMetrics.expectGauge("risc_jwks_usable"))?.lastValue == 1
            if !sampled { usleep(50_000) }
        }
        #expect(sampled)
        let text = registry.emitToString()
        #expect(text.contains(#"risc_sets_total{outcome="accepted"} 1"#), "\(text)")
        #expect(try await harness.get(harness.adminURL + "/metrics").status == 404)
        #expect(try await harness.get(harness.adminURL + "/readyz").status == 200)
        try await harness.stop()
        harness.issuer.stop()
    }
}
