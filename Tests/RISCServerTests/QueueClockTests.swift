import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

/// The receiver's queue workers keep the receiver's clock, as its intake and periodic services
/// do: a failed action's backoff is counted on it, so a test (or a drill) moves the clock instead
/// of waiting out a retry delay.
@Suite("queue workers on the receiver's clock")
struct QueueClockTests {
    typealias Backend = StorePortTests.Backend

    @Test(
        "a failed delivery's retry is due the backoff after the receiver's clock, and comes once that clock gets there (the workers counted on the wall clock)",
        arguments: Backend.allCases)
    func retryOnTheReceiversClock(_ backend: Backend) async throws {
        let site = try await WebhookSite(backend, failures: 1)
        let harness = try ServerHarness(dataDirectory: site.dataDirectory) {
            site.configure(&$0)
            $0.retry.baseDelay = 600
            $0.retry.maximumDelay = 600
            $0.retry.jitter = 0
        }
        let clock = TestClock(Date().timeIntervalSince1970)
        harness.clock = clock
        try await harness.start()

        #expect(try await harness.post(try harness.token(jti: "backoff-1")).status == 202)
        func attempts() -> [JSONObject] { harness.eventLogLines.filter { $0["jti"] == "backoff-1" && $0["step"] == "applied" } }
        #expect(await waitWhile { attempts().isEmpty }, "the first delivery was never attempted")
        let failed = try #require(attempts().first)
        #expect(failed["outcome"] == "failed")
        #expect(failed["retry_at"] == .string(Timestamp.iso8601(clock.now + 600)), "\(JSONValue.object(failed).serialized)")

        // The clock gets to the retry: the worker, idle, wakes and delivers again. (It moves on in
        // steps: an idle wait that began after the first step ends at a later one.)
        clock.advance(600)
        let retried = await waitWhile {
            clock.advance(1)
            return attempts().count < 2
        }
        #expect(retried, "the retry never came: \(attempts().map { JSONValue.object($0).serialized })")
        #expect(attempts().last?["outcome"] == "applied")
        #expect(site.recorder.bodies.count == 2)

        try await harness.stop()
        harness.issuer.stop()
        try await site.stop()
    }
}
