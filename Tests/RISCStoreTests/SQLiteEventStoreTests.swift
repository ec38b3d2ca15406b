import Foundation
import Logging
import RISCCore
import RISCStore
import RISCTestKit
import Testing

@Suite("SQLite event store and event log")
struct SQLiteEventStoreTests {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    static let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)

    static func record(jti: String) async throws -> SETRecord {
        try await factory.storedRecord(
            type: .accountDisabled, subject: factory.accountSubject("77"), extra: ["reason": "hijacking"], jti: jti, keys: try keys.jwks,
            receivedAt: Date().timeIntervalSince1970)
    }

    static func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("risc-store-\(UUID().uuidString)").path
    }

    @Test("concurrent appends share commits; duplicates within and across batches count once each")
    func groupCommit() async throws {
        let store = try SQLiteEventStore(directory: Self.directory(), logger: Logger(label: "t"))
        let records = try await (0..<200).asyncMap { try await Self.record(jti: "j\($0 % 150)") }
        let outcomes = try await withThrowingTaskGroup(of: AppendOutcome.self) { group in
            for record in records { group.addTask { try await store.append(record) } }
            return try await group.reduce(into: [AppendOutcome]()) { $0.append($1) }
        }
        let accepted = outcomes.filter { if case .accepted = $0 { true } else { false } }.count
        #expect(accepted == 150)
        #expect(outcomes.count - accepted == 50)
        #expect(try store.count() == 150)
        #expect(try store.queueDepth() == 150)
        let writes = store.writeCounts
        #expect(writes.rows == 200)
        #expect(writes.commits < 200, "no batching happened")
        #expect(try store.record(issuer: "https://accounts.google.com", jti: "j1")?.deliveries == 2)
        #expect(try store.lastReceivedAt() != nil)
        store.close()
        await #expect(throws: StoreError.self) { _ = try await store.append(records[0]) }
    }

    @Test("rows survive closing and reopening, and the schema is not re-applied")
    func reopen() async throws {
        let directory = Self.directory()
        let first = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        _ = try await first.append(try await Self.record(jti: "persist"))
        first.close()
        let second = try SQLiteEventStore(directory: directory, logger: Logger(label: "t"))
        #expect(try second.count() == 1)
        #expect(try await second.append(try await Self.record(jti: "persist")) == .duplicate(id: 1, deliveries: 2))
        #expect(second.isWritable())
        second.close()
    }

    @Test("the event log writes JSON lines and reopens its file on request (log rotation)")
    func eventLogRotation() throws {
        let directory = Self.directory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/events.log"
        let log = try JSONLinesEventLog(path: path, flushInterval: 0.05)
        var record = EventLogRecord(step: "received", outcome: "accepted", time: 1_800_000_000)
        record["jti"] = "a"
        log.record(record)
        log.flush()
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        log.reopen()
        Thread.sleep(forTimeInterval: 0.2)
        record["jti"] = "b"
        log.record(record)
        log.close()
        let rotated = try String(contentsOfFile: path + ".1", encoding: .utf8)
        let fresh = try String(contentsOfFile: path, encoding: .utf8)
        #expect(rotated.contains(#""jti":"a""#) && !rotated.contains(#""jti":"b""#))
        #expect(fresh.contains(#""jti":"b""#))
        for line in (rotated + fresh).split(separator: "\n") {
            let object = try JSONParser.parseObject(Array(line.utf8))
            #expect(object["v"] == 1 && object["ts"]?.stringValue?.hasSuffix("Z") == true)
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
