import Foundation
import Logging
import RISCClient
import RISCCore
import RISCLocal
import RISCSQLite
import RISCTestKit
import Synchronization
import Testing

@Suite("Webhook sink")
struct WebhookSinkTests {
    @Test("a webhook that fails twice then succeeds: retried with backoff, then done; requests are signed")
    func retriesThenSucceeds() async throws {
        let recorder = WebhookRecorder(failures: 2)
        let server = try LoopbackHTTPServer { recorder.handle($0) }
        defer { server.stop() }
        let secret = Array("0123456789abcdef0123".utf8)
        let directory = Scratch.root.appendingPathComponent("risc-webhook-\(UUID().uuidString)").path
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        let log = try JSONLinesEventLog(path: directory + "/events.log")
        var retry = RetryPolicy()
        retry.jitter = 0
        let worker = QueueWorker(
            queue: try EmbeddedWorkQueue(directory: directory), settings: .init(owner: "test"), retry: retry,
            sink: try WebhookSink(url: server.baseURL + "/revoke", secret: secret), log: log, logger: Logger(label: "t"))
        let keys = try KeyDirectory.repositoryTestKeys()
        let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
        _ = try await store.append(
            try await factory.storedRecord(
                type: .tokenRevoked, subject: SETFactory.tokenSubject(refreshToken: "1//0gsecret-refresh", algorithm: .prefix), jti: "w1",
                iat: 2_000, keys: try keys.jwks))

        try await worker.processDue(now: 3_000)  // 503
        try await worker.processDue(now: 3_001.05)  // 503 (after 1 s)
        try await worker.processDue(now: 3_002.1)  // not due (2 s backoff)
        try await worker.processDue(now: 3_003.2)  // 204
        #expect(server.requestCount == 3)
        #expect(try store.record(issuer: "https://accounts.google.com", jti: "w1")?.state == "done")
        log.settle()
        let outcomes = try String(contentsOfFile: directory + "/events.log", encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONParser.parseObject(Array($0.utf8)) }.filter { $0["step"] != "log" }.map { $0["outcome"]?.stringValue ?? "" }
        #expect(outcomes == ["failed", "failed", "applied"])

        let request = try #require(recorder.requests.withLock { $0.last })
        let timestamp = try #require(request.header("x-risc-timestamp"))
        // The signed time is the worker's clock's, as every other time it records (it was the system's).
        #expect(timestamp == "3003")
        #expect(try JSONParser.parseObject(request.body)["sent_at"] == .number(3003))
        let expected = "sha256=" + HMACSHA256.hex(key: secret, data: Array((timestamp + ".").utf8) + request.body)
        #expect(request.header("x-risc-signature") == expected)
        let body = try JSONParser.parseObject(request.body)
        #expect(body["jti"] == "w1")
        // Issue 16: `iss` is the token's, as `subject.iss` and the event log have it (it dropped Google's trailing '/').
        #expect(body["iss"] == "https://accounts.google.com/")
        let event = try #require(body["events"]?.arrayValue?.first?.objectValue)
        #expect(event["actions"] == ["revoke_token"])
        #expect(event["subject"]?.objectValue?["token"] == "1//0gsecret-refr")  // the first 16 characters
        #expect(!String(decoding: request.body, as: UTF8.self).contains("1//0gsecret-refresh"))
    }

    @Test("a webhook down for longer than the attempts allow: dead letter, requeued with risc queue retry --dead, then done")
    func deadLetterThenRequeue() async throws {
        let recorder = WebhookRecorder(failures: 3, failureStatus: 500, successStatus: 200)
        let server = try LoopbackHTTPServer { recorder.handle($0) }
        defer { server.stop() }
        let directory = Scratch.root.appendingPathComponent("risc-webhook-dead-\(UUID().uuidString)").path
        let store = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        defer { store.close() }
        let log = try JSONLinesEventLog(path: directory + "/events.log")
        var retry = RetryPolicy()
        retry.maximumAttempts = 2
        retry.jitter = 0
        let worker = QueueWorker(
            queue: try EmbeddedWorkQueue(directory: directory), settings: .init(owner: "test"), retry: retry,
            sink: try WebhookSink(url: server.baseURL + "/revoke", secret: Array(repeating: 7, count: 32)), log: log, logger: Logger(label: "t"))
        let keys = try KeyDirectory.repositoryTestKeys()
        let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
        _ = try await store.append(
            try await factory.storedRecord(
                type: .sessionsRevoked, subject: factory.accountSubject("5"), jti: "dl-1", iat: 2_000, keys: try keys.jwks))
        try await worker.processDue(now: 3_000)
        try await worker.processDue(now: 3_002)
        #expect(try store.record(issuer: "https://accounts.google.com", jti: "dl-1")?.state == "dead")
        try await worker.processDue(now: 9_999)  // dead letters are not retried on their own
        #expect(server.requestCount == 2)
        #expect(try await SQLiteStore.queueAdmin(directory: directory).retry(jti: nil) == 1)
        try await worker.processDue(now: 10_000)  // third failure: scheduled again
        try await worker.processDue(now: 10_002)  // succeeds
        #expect(try store.record(issuer: "https://accounts.google.com", jti: "dl-1")?.state == "done")
        #expect(server.requestCount == 4)
    }

    @Test("plain HTTP to a non-loopback webhook and short secrets are refused")
    func refused() {
        #expect(throws: FetchError.self) { _ = try WebhookSink(url: "http://example.com/hook", secret: Array(repeating: 1, count: 32)) }
        #expect(throws: FetchError.self) { _ = try WebhookSink(url: "https://example.com/hook", secret: [1, 2, 3]) }
    }
}
