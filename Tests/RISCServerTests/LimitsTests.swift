import Foundation
import RISCClient
import RISCCore
import RISCServer
import Testing

@Suite("Per-address limit on invalid requests; X-Forwarded-For from trusted proxies", .serialized)
struct LimitsTests {
    @Test("after N refused requests an address gets 429 with Retry-After; others and valid SETs before it are unaffected")
    func invalidLimit() async throws {
        let harness = try ServerHarness {
            $0.invalidPerMinute = 5
            $0.trustedProxies = ["127.0.0.1"]
        }
        try await harness.start()
        let junk = "not.a.jws"
        // A valid SET takes no token.
        #expect(try await harness.post(try harness.token(), forwardedFor: "203.0.113.7").status == 202)
        for _ in 0..<5 { #expect(try await harness.post(junk, forwardedFor: "10.1.1.1, 203.0.113.7").status == 400) }
        let limited = try await harness.post(try harness.token(), forwardedFor: "203.0.113.7")
        #expect(limited.status == 429)
        #expect(Int(limited.header("retry-after") ?? "") ?? 0 >= 1)
        // Another client behind the same proxy is not limited.
        #expect(try await harness.post(try harness.token(jti: "other-client"), forwardedFor: "198.51.100.1").status == 202)
        let lines = harness.eventLogLines
        #expect(lines.contains { $0["outcome"] == "limited" && $0["remote"] == "203.0.113.7" })
        #expect(lines.contains { $0["jti"] == "other-client" && $0["remote"] == "198.51.100.1" })
        let metrics = String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"risc_sets_total{outcome="limited"} 1"#))
        try await harness.stop()
    }

    @Test("X-Forwarded-For is ignored unless the peer is a trusted proxy; the limit is off by default")
    func untrusted() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        for _ in 0..<50 { #expect(try await harness.post("junk", forwardedFor: "203.0.113.9").status == 400) }
        #expect(try await harness.post(try harness.token(jti: "direct"), forwardedFor: "203.0.113.9").status == 202)
        #expect(harness.eventLogLines.contains { $0["jti"] == "direct" && $0["remote"] == "127.0.0.1" })
        try await harness.stop()
    }
}
