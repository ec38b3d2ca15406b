import Foundation
import RISCCore
import RISCTestKit
import Testing

/// Issue 14 §4: the commands that read or fill a store of their own work on PostgreSQL too:
/// `stream verify` (the verification ledger), `drill crash` and `bench actions`.
@Suite("stream verify, drill crash, bench actions on PostgreSQL (the built binary)", .serialized)
struct SharedStoreToolTests {
    @Test("stream verify --store-url: the state is recorded in the shared store and the receiver on it matches the verification SET")
    func streamVerify() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let directory = Scratch.root.appendingPathComponent("risc-stream-pg-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let keyFile = directory.appendingPathComponent("token-key").path
            try PrivateFiles.writeAtomically(keyFile, [UInt8](repeating: 7, count: 32))
            let (certificate, account, _, api) = try StreamCommandTests.fakeGoogle(directory: directory)
            defer { api.stop() }
            let (serve, _, port, _) = try await ServeCommandTests.startServe(extra: [
                "--tls-cert", certificate.certificatePath, "--tls-key", certificate.keyPath, "--store-url", cluster.url,
                "--set", "accounts.token_key_file=\(keyFile)",
            ])
            defer { serve.terminate() }
            let common = ["--credentials", account.path, "--api-base", api.baseURL]
            #expect(try await RiscBinary.run(["stream", "update", "--url", "https://localhost:\(port)/events"] + common).status == 0)
            // A data directory with no store in it: the shared store is used, and no embedded one made.
            let empty = directory.appendingPathComponent("no-store").path
            let verified = try await RiscBinary.run(
                ["stream", "verify", "--wait", "20s", "--store-url", cluster.url, "--data-dir", empty, "--state", "pg-round-trip", "--json"] + common)
            #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
            let object = try JSONParser.parseObject(Array(verified.stdout.utf8))
            #expect(object["matched"] == true && object["alg"]?.stringValue == "RS256", "\(verified.stdout)")
            #expect(try await cluster.psql("SELECT state || ' ' || (matched_at IS NOT NULL) FROM stream_verifications") == "pg-round-trip true")
            #expect(!FileManager.default.fileExists(atPath: empty + "/risc.sqlite3"))
        }
    }

    @Test("drill crash --store-url throwaway: SIGKILL cycles with the receiver on PostgreSQL, every acknowledged SET stored and applied once")
    func crashDrill() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let port = try DrillCommandTests().port()
        let result = try await RiscBinary.run([
            "drill", "crash", "--cycles", "3", "--concurrency", "4", "--accounts", "20", "--port", port, "--store-url", "throwaway",
        ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("crash drill: PostgreSQL store, 3 cycles"), "\(result.stdout)")
        #expect(result.stdout.contains("lost                     0"))
        #expect(result.stdout.contains("0 applied twice"))
        #expect(result.stdout.contains("PASSED"))
    }

    @Test("bench actions --store-url throwaway applies every SET through the queue's workers; a database that holds SETs is refused")
    func actionsBench() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let result = try await RiscBinary.run(["bench", "actions", "--accounts", "50", "--events", "300", "--store-url", "throwaway"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("PostgreSQL store: applied 300 SETs (50 accounts;"), "\(result.stdout)")
        // Found: the line ended "(target ≥ 5,000/s)", the embedded store's target, beside a figure
        // under it: read as a target missed. PostgreSQL's path has none (a round trip an action).
        #expect(!result.stdout.contains("5,000") && result.stdout.contains("no target"), "\(result.stdout)")

        try await PostgresCluster.with { cluster in
            let data = Scratch.root.appendingPathComponent("risc-tool-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: data) }
            // A store in use: one SET in it.
            let keyFile = data + "-token-key"
            try PrivateFiles.writeAtomically(keyFile, [UInt8](repeating: 9, count: 32))
            defer { try? FileManager.default.removeItem(atPath: keyFile) }
            // Its event log in a data directory of the test's, not the repository's ./data.
            let repositoryLog = RiscBinary.repositoryEventLogSize()
            let replay = try await RiscBinary.run(
                ["replay", "-", "--local", "--store-url", cluster.url, "--token-key-file", keyFile, "--data-dir", data],
                stdin: #"{"type":"sessions-revoked","subject":"1","jti":"in-use"}"#)
            try #require(replay.status == 0, "\(replay.stdout) \(replay.stderr)")
            #expect(RiscBinary.repositoryEventLogSize() == repositoryLog, "replay wrote into the repository's ./data/events.log")
            let config = data + ".json"
            try Data(#"{"audiences": ["a"], "store": {"url": "\#(cluster.url)"}, "accounts": {"token_key_file": "\#(keyFile)"}}"#.utf8).write(
                to: URL(fileURLWithPath: config))
            defer { try? FileManager.default.removeItem(atPath: config) }
            let refused = try await RiscBinary.run(["bench", "actions", "--accounts", "5", "--events", "10", "--config", config])
            #expect(refused.status == 64 && refused.stderr.contains("already holds SETs"), "\(refused.stdout) \(refused.stderr)")
            #expect(try await cluster.psql("SELECT count(*) FROM sets") == "1")
        }
    }

    @Test("bench retention --store-url throwaway: the shared store shrinks once retention strips and forgets its SETs")
    func retentionBench() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let result = try await RiscBinary.run(["bench", "retention", "--sets", "400", "--store-url", "throwaway"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("PostgreSQL (after VACUUM FULL)") }, "\(result.stdout)")
        let figures = line.split(separator: " ").compactMap { Double($0) }.suffix(3)
        #expect(figures.count == 3, "\(line)")
        let (whole, stripped, forgotten) = (figures[figures.startIndex], figures[figures.startIndex + 1], figures[figures.startIndex + 2])
        #expect(whole > stripped && stripped > forgotten, "\(line)")
    }
}
