import Foundation
import RISCClient
import RISCCore
import RISCSQLite
import RISCServer
import RISCTestKit
import Synchronization
import Testing

/// Outage drills, automated (issue 7): each scenario runs the real receiver on loopback, breaks
/// what it depends on, and prints what happened. (The issuer-unreachable-with-nothing-kept case
/// is `EndpointTests.keysUnavailable`; SIGTERM under load is `risc drill crash --signal TERM`.)
@Suite("Outage drills", .serialized)
struct OutageDrillTests {
    @Test("issuer unreachable at start, with a persisted key set: still verifies and acknowledges")
    func persistedKeys() async throws {
        let first = try ServerHarness()
        try await first.start()
        #expect(try await first.post(try first.token(jti: "before")).status == 202)
        try await first.stop()
        #expect(FileManager.default.fileExists(atPath: first.dataDirectory + "/jwks-cache.json"))

        first.issuer.update { $0.failWith = 503 }
        let second = try ServerHarness(dataDirectory: first.dataDirectory, issuer: first.issuer)
        try await second.start()
        let response = try await second.post(try second.token(jti: "during-outage"))
        #expect(response.status == 202)
        let ready = try await second.get(second.adminURL + "/readyz")
        #expect(ready.status == 200)
        print("drill persisted-keys: issuer answering 503; SET → \(response.status); /readyz → \(ready.status) \(String(decoding: ready.body, as: UTF8.self))")
        try await second.stop()
        first.issuer.stop()
    }

    @Test("issuer unreachable for longer than the maximum staleness: 503 (not 400), then recovery")
    func staleBeyondLimit() async throws {
        let harness = try ServerHarness {
            $0.jwksMinimumTTL = 1
            $0.jwksMaximumTTL = 1
            $0.jwksMaximumStaleness = 3
        }
        // The key cache's TTL and staleness on the receiver's clock, which the test moves: a slow
        // machine's requests take none of the allowance (the stale post came too late once in CI).
        let clock = TestClock(Date().timeIntervalSince1970)
        harness.clock = clock
        harness.issuer.update { $0.maxAge = 0 }
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "fresh")).status == 202)
        harness.issuer.update { $0.failWith = 503 }
        // Expired (TTL 1 s), within the staleness allowance (3 s): the set still serves.
        clock.advance(2)
        let stale = try await harness.post(try harness.token(jti: "stale-but-allowed"))
        clock.advance(3)
        let beyond = try await harness.post(try harness.token(jti: "too-stale"))
        #expect(stale.status == 202)
        #expect(beyond.status == 503 && beyond.header("retry-after") == "7")
        #expect(!harness.eventLogLines.contains { $0["jti"] == "too-stale" && $0["outcome"] == "rejected" })
        harness.issuer.update { $0.failWith = nil }
        var recovered = 0
        for _ in 0..<50 where recovered != 202 {
            recovered = try await harness.post(try harness.token(jti: "after")).status
            if recovered != 202 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(recovered == 202)
        print("drill stale-keys: within staleness → \(stale.status); beyond it → \(beyond.status); after the issuer returns → \(recovered)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("webhook sink down for a stretch: every SET delivered afterwards, none lost, none dead")
    func webhookDown() async throws {
        let downUntil = Date().addingTimeInterval(3)
        let delivered = Mutex<[String: Int]>([:])
        let attempts = Mutex(0)
        let sink = try LoopbackHTTPServer { request in
            attempts.withLock { $0 += 1 }
            guard Date() >= downUntil else { return .init(status: 503) }
            if let jti = (try? JSONParser.parseObject(request.body))?["jti"]?.stringValue {
                delivered.withLock { $0[jti, default: 0] += 1 }
            }
            return .init(status: 204)
        }
        defer { sink.stop() }
        let secretFile = Scratch.root.appendingPathComponent("risc-secret-\(UUID().uuidString)").path
        try #require(FileManager.default.createFile(atPath: secretFile, contents: Data("0123456789abcdef-secret".utf8)))
        let harness = try ServerHarness {
            $0.webhookURL = sink.baseURL + "/revoke"
            $0.webhookSecretFile = secretFile
            $0.retry.baseDelay = 0.05
            $0.retry.maximumDelay = 0.4
            $0.retry.maximumAttempts = 1_000
        }
        try await harness.start()
        let jtis = (0..<40).map { "webhook-\($0)" }
        for jti in jtis { #expect(try await harness.post(try harness.token(jti: jti)).status == 202) }
        let start = Date()
        while delivered.withLock({ $0.count }) < jtis.count, Date().timeIntervalSince(start) < 30 {
            try await Task.sleep(for: .milliseconds(100))
        }
        let counts = delivered.withLock { $0 }
        #expect(Set(counts.keys) == Set(jtis))
        #expect(counts.values.allSatisfy { $0 == 1 })
        let status = try await SQLiteStore.queueAdmin(directory: harness.dataDirectory).counts(now: systemNow())
        #expect(status.dead == 0)
        print("drill webhook-down: sink down 3 s; \(attempts.withLock { $0 }) attempts; \(counts.count)/\(jtis.count) delivered once each after it returned, dead \(status.dead)")
        try await harness.stop()
        harness.issuer.stop()
    }

    static var canMount: Bool { geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount") }

    static func run(_ arguments: [String]) -> Int32 {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test(
        "disk full: 503 with Retry-After (never 400), no corruption, and it recovers when space returns",
        .enabled(if: canMount, "needs root to mount a small tmpfs"))
    func diskFull() async throws {
        let mountPoint = Scratch.root.appendingPathComponent("risc-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try #require(Self.run(["/bin/mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mountPoint]) == 0)
        defer {
            _ = Self.run(["/bin/umount", "-l", mountPoint])
            try? FileManager.default.removeItem(atPath: mountPoint)
        }
        let data = mountPoint + "/data"
        let harness = try ServerHarness(dataDirectory: data)
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "before-full")).status == 202)
        // Fill the file system to the last byte.
        let filler = mountPoint + "/filler"
        try #require(FileManager.default.createFile(atPath: filler, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: filler))
        let chunk = Data(count: 16 * 1024)
        while (try? handle.write(contentsOf: chunk)) != nil {}
        var small = Data(count: 512)
        while !small.isEmpty {
            if (try? handle.write(contentsOf: small)) == nil { small = small.prefix(small.count / 2) }
        }
        try handle.close()

        var acknowledged = ["before-full"], statuses: [Int: Int] = [:]
        var sawRetryAfter = false
        for index in 0..<400 {
            let jti = "full-\(index)"
            let response = try await harness.post(try harness.token(jti: jti))
            statuses[response.status, default: 0] += 1
            if response.status == 202 { acknowledged.append(jti) }
            if response.status == 503 { sawRetryAfter = response.header("retry-after") == "7" }
            if statuses[503, default: 0] >= 20 { break }
        }
        #expect(statuses[503, default: 0] > 0 && sawRetryAfter)
        #expect(statuses[400] == nil)
        #expect(try await harness.get(harness.adminURL + "/healthz").status == 200)

        try FileManager.default.removeItem(atPath: filler)
        var recovered = 0
        for attempt in 0..<50 where recovered != 202 {
            let jti = "after-\(attempt)"
            recovered = try await harness.post(try harness.token(jti: jti)).status
            if recovered == 202 { acknowledged.append(jti) } else { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(recovered == 202)
        try await harness.stop()
        let audit = try await SQLiteStore.queueAdmin(directory: data).audit(acknowledged: acknowledged)
        #expect(audit.lost == 0 && audit.integrity == "ok")
        print(
            "drill disk-full: answers while full \(statuses.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")); after space returned → \(recovered); acknowledged \(audit.acknowledged), lost \(audit.lost), integrity \(audit.integrity ?? "-")"
        )
        harness.issuer.stop()
    }
}
