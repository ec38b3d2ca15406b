import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

@testable import RISCSQLite

@Suite("Actions applied in the storing transaction", .serialized)
struct InlineActionsTests {
    @Test("when the actions fail inline, the SET is still acknowledged and stored pending; the worker applies it later")
    func fallback() async throws {
        let harness = try ServerHarness { $0.retry.baseDelay = 0.1 }
        _ = try await AccountStore(directory: harness.dataDirectory).link([
            .init(
                issuer: harness.issuer.baseURL, subject: "110169484474386276334", userID: "u-1", sessions: ["s-1"])
        ])
        // Make ending sessions fail, as a broken schema or a full disk inside the savepoint would.
        let sabotage = try SQLiteConnection(path: harness.dataDirectory + "/risc.sqlite3")
        try sabotage.execute("CREATE TRIGGER sabotage BEFORE UPDATE ON sessions BEGIN SELECT RAISE(ABORT, 'sabotaged'); END")
        try await harness.start()
        #expect(try await harness.post(try harness.token(jti: "inline-fails")).status == 202)
        let stored = try #require(try harness.receiver.storage.store.embedded!.events().record(issuer: harness.issuer.baseURL, jti: "inline-fails"))
        #expect(stored.state == "pending")
        #expect(harness.eventLogLines.contains { $0["jti"] == "inline-fails" && $0["outcome"] == "deferred" })

        try sabotage.execute("DROP TRIGGER sabotage")
        var state = stored.state
        for _ in 0..<100 where state != "done" {
            try await Task.sleep(for: .milliseconds(50))
            state = try harness.receiver.storage.store.embedded!.events().record(issuer: harness.issuer.baseURL, jti: "inline-fails")?.state ?? ""
        }
        #expect(state == "done")
        let account = try #require(try await AccountStore(directory: harness.dataDirectory).accounts(subject: "110169484474386276334").first)
        #expect(account.openSessions == 0)
        try await harness.stop()
        harness.issuer.stop()
    }
}
