import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

@testable import RISCSQLite

/// Issue 30: a pushed SET is answered once it is durable in the journal, before the store holds
/// it; a receiver killed in between leaves it only in the journal.
@Suite("risc serve: the journal at a start")
struct JournalRecoveryTests {
    @Test("a start stores and applies the SETs a killed receiver had journaled and not stored, logged recovered, before it listens")
    func recoversJournal() async throws {
        let harness = try ServerHarness()
        // What a receiver killed between its 202 and its index leaves: a journal record, no row.
        let token = try harness.token(jti: "journaled-1")
        let now = Date().timeIntervalSince1970
        let record = SETRecord(
            issuer: SETPolicy.issuerScope(harness.issuer.baseURL), claimedIssuer: harness.issuer.baseURL + "/", tokenID: "journaled-1",
            issuedAt: now, receivedAt: now, remoteAddress: "127.0.0.1", contentType: "application/secevent+jwt", token: token,
            claims: try SecurityEventToken(payload: CompactJWS(token).payload))
        let journal = harness.dataDirectory + "/journal"
        try PrivateFiles.makeDirectory(journal)
        try Data(SETJournal.frame(record)).write(to: URL(fileURLWithPath: journal + "/" + SETJournal.fileName(1)))

        try await harness.start()
        let events = try harness.receiver.storage.store.embedded!.events()
        let stored = try #require(try events.record(issuer: harness.issuer.baseURL, jti: "journaled-1"))
        #expect(stored.deliveries == 1 && stored.state == "done", "stored and its actions applied at the start")
        let lines = harness.eventLogLines.filter { $0["jti"] == "journaled-1" }
        #expect(lines.map { $0["step"]?.stringValue ?? "" } == ["received", "applied"])
        #expect(lines.first?["recovered"] == true && lines.first?["outcome"] == "accepted")
        #expect(SETJournal.segments(in: journal) == [2], "the old segment went; the next one is numbered after it")
        // Google sends it again (its 202 may have been lost with the process): a duplicate, counted.
        #expect(try await harness.post(token).status == 202)
        #expect(try events.record(issuer: harness.issuer.baseURL, jti: "journaled-1")?.deliveries == 2)
        try await harness.stop()
    }
}
