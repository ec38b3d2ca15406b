import Foundation
import RISCCore
import RISCTestKit
import Testing

@testable import RISCSQLite

/// Issue 14 §4: the operator's commands on the shared store, and moving an embedded store into it.
@Suite("risc store, accounts, queue, replay on PostgreSQL (the built binary)", .serialized)
struct SharedStoreCommandTests {
    func run(_ arguments: [String], stdin: String? = nil) async throws -> RiscBinary.Result {
        try await RiscBinary.run(arguments, stdin: stdin)
    }

    @Test("store copy moves an embedded store into PostgreSQL (counts and a sample verified); accounts, queue and replay --local then work on it")
    func copyThenOperate() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let data = Scratch.root.appendingPathComponent("risc-copy-\(UUID().uuidString)").path
            // An embedded store with an account, SETs applied to it, and a dead letter.
            var result = try await run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42", "--session", "s1", "--session", "s2"])
            try #require(result.status == 0, "\(result.stderr)")
            let descriptions = [
                #"{"type":"sessions-revoked","subject":"42","jti":"copy-1","iat":2000}"#,
                #"{"type":"account-disabled","reason":"bulk-account","subject":"42","jti":"copy-2"}"#,
            ].joined(separator: "\n")
            result = try await run(["replay", "-", "--local", "--data-dir", data], stdin: descriptions)
            try #require(result.status == 0, "\(result.stdout) \(result.stderr)")

            // Issue 26 §7: the store's status, read only.
            result = try await run(["store", "status", "--data-dir", data])
            #expect(result.status == 0, "\(result.stderr)")
            var status = try JSONParser.parseObject(Array(result.stdout.utf8))
            #expect(status["backend"] == "embedded" && status["serving_pid"] == .null && status["journal_damaged"] == [], "\(result.stdout)")
            #expect(status["schema"]?.objectValue?["state"] == "current" && status["queue"]?.objectValue?["done"] == 2, "\(result.stdout)")

            // Issue 30: a SET a killed receiver acknowledged from its journal, not yet in the store:
            // shown by the status, and the copy refused (it would be left behind).
            let keys = try KeyDirectory.repositoryTestKeys()
            let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
            let record = try await factory.storedRecord(type: .sessionsRevoked, subject: factory.accountSubject("42"), jti: "copy-journaled", keys: try keys.jwks)
            try PrivateFiles.makeDirectory(data + "/journal")
            let segmentPath = data + "/journal/" + SETJournal.fileName(1)
            try Data(SETJournal.frame(record)).write(to: URL(fileURLWithPath: segmentPath))
            result = try await run(["store", "status", "--data-dir", data])
            #expect(try JSONParser.parseObject(Array(result.stdout.utf8))["journaled_not_indexed"] == 1, "\(result.stdout) \(result.stderr)")
            result = try await run(["store", "copy", "--from", data, "--to", cluster.url])
            #expect(result.status != 0 && result.stderr.contains("1 acknowledged SETs are in the journal"), "\(result.stdout) \(result.stderr)")
            try FileManager.default.removeItem(atPath: segmentPath)

            let copied = try await run(["store", "copy", "--from", data, "--to", cluster.url])
            #expect(copied.status == 0, "\(copied.stdout) \(copied.stderr)")
            result = try await run(["store", "status", "--store-url", cluster.url])
            status = try JSONParser.parseObject(Array(result.stdout.utf8))
            #expect(status["backend"] == "postgresql" && status["schema"]?.objectValue?["state"] == "current", "\(result.stdout) \(result.stderr)")
            #expect(status["queue"]?.objectValue?["done"] == 2, "\(result.stdout)")
            result = try await run(["store", "status", "--data-dir", data])
            #expect(result.stdout.contains("was copied to"), "\(result.stdout)")
            #expect(copied.stdout.contains("sample of 2 SETs compared row by row: identical"), "\(copied.stdout)")
            #expect(copied.stdout.contains("applied_actions        2          ok"), "\(copied.stdout)")
            #expect(try await cluster.psql("SELECT string_agg(jti || ':' || state, ',' ORDER BY id) FROM sets") == "copy-1:done,copy-2:done")
            // Issue 26 §8: the old data directory is marked; serving from it as an embedded store is refused (exit 64).
            result = try await run([
                "serve", "--audience", SETFactory.defaultAudience, "--jwks-file", "keys/test/jwks.json", "--issuer", SETFactory.defaultIssuer,
                "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--data-dir", data,
            ])
            #expect(result.status == 64, "\(result.stderr)")
            #expect(result.stderr.contains("was copied to") && result.stderr.contains("remove \(data)/moved-to"), "\(result.stderr)")
            // Into a store that is not empty: refused, nothing written.
            result = try await run(["store", "copy", "--from", data, "--to", cluster.url])
            #expect(result.status != 0 && result.stderr.contains("not empty"), "\(result.stderr)")
            #expect(try await cluster.psql("SELECT count(*) FROM sets") == "2")

            let key = data + "/token-key"
            // The event log of the commands on the shared store goes to a data directory of the
            // test's; without one they wrote into the repository's ./data (checked at the end).
            let repositoryLog = RiscBinary.repositoryEventLogSize()
            let shared = ["--store-url", cluster.url, "--data-dir", data + "-shared"]
            result = try await run(["accounts", "show", "42", "--token-key-file", key] + shared)
            #expect(result.status == 0 && result.stdout.contains(#""flagged_for_review": true"#), "\(result.stdout) \(result.stderr)")
            // The account commands need the shared key; another is refused.
            let other = data + "-other-key"
            _ = try await run(["keys", "token-key", "--out", other])
            result = try await run(["accounts", "list", "--token-key-file", other] + shared)
            #expect(result.status != 0 && result.stderr.contains("is not the key"), "\(result.stderr)")
            result = try await run(["accounts", "link", "--subject", "43", "--user", "u43", "--session", "t1", "--token-key-file", key] + shared)
            #expect(result.status == 0, "\(result.stderr)")

            result = try await run(["replay", "-", "--local", "--token-key-file", key] + shared, stdin: #"{"type":"sessions-revoked","subject":"43","jti":"pg-local"}"#)
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains(#""actions":[{"action":"end_sessions","result":"ended 1 session"}]"#), "\(result.stdout)")
            result = try await run(["queue", "status"] + shared)
            #expect(result.stdout.contains(#""done": 3"#), "\(result.stdout)")
            result = try await run(["queue", "show", "pg-local"] + shared)
            #expect(result.status == 0 && result.stdout.contains("ended 1 session"), "\(result.stdout)")
            result = try await run(["replay", "--from-store", "--local", "--jti", "copy-1", "--token-key-file", key] + shared)
            #expect(result.status == 0 && result.stdout.contains(#""state":"done""#), "\(result.stdout) \(result.stderr)")
            result = try await run(["store", "migrate"] + shared)
            #expect(result.status == 0 && result.stdout.contains("current"), "\(result.stdout)")
            // A store URL with a password in it is refused with a clear message, never echoed.
            result = try await run(["queue", "status", "--store-url", "postgres://risc:hunter2@localhost/risc"])
            #expect(result.status != 0 && !result.stderr.contains("hunter2") && result.stderr.contains("password"), "\(result.stderr)")
            #expect(RiscBinary.repositoryEventLogSize() == repositoryLog, "a command wrote into the repository's ./data/events.log")
        }
    }

    /// Found: a PostgreSQL error in a command after the store opened (here a damaged schema)
    /// printed only PostgresNIO's "Generic description to prevent accidental leakage of sensitive data".
    @Test("a server's error in a command reads as the server's message and SQLSTATE, not the driver's generic text")
    func serverErrorsInItsWords() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            var result = try await run(["store", "migrate", "--store-url", cluster.url])
            try #require(result.status == 0, "\(result.stderr)")
            try await cluster.psql("ALTER TABLE sets RENAME COLUMN jti TO jti_renamed")
            result = try await run(["queue", "list", "--store-url", cluster.url])
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stderr.contains(#"PostgreSQL said: column "jti" does not exist (SQLSTATE 42703)"#), "\(result.stderr)")
            #expect(!result.stderr.contains("Generic description"), "\(result.stderr)")
        }
    }

    @Test("issue 26 §5: serve --check-config --connect finds the store as a start would, read only: reachable and current, older, absent (69), refused (64)")
    func checkConfigConnect() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let data = Scratch.root.appendingPathComponent("risc-connect-\(UUID().uuidString)").path
            let key = data + "-key"
            _ = try await run(["keys", "token-key", "--out", key])
            func check(_ extra: [String]) async throws -> RiscBinary.Result {
                try await run(
                    [
                        "serve", "--audience", SETFactory.defaultAudience, "--jwks-file", "keys/test/jwks.json", "--issuer", SETFactory.defaultIssuer,
                        "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--data-dir", data, "--set", "accounts.token_key_file=\(key)",
                        "--check-config", "--connect",
                    ] + extra)
            }
            var result = try await check([])
            #expect(result.status == 0 && result.stdout.contains("embedded store: none yet"), "\(result.stdout) \(result.stderr)")
            result = try await check(["--store-url", cluster.url])
            #expect(result.status == 0 && result.stdout.contains("reachable, schema version 0 (older: the start migrates it to"), "\(result.stdout) \(result.stderr)")
            // The accounts risc acts on are in PostgreSQL then, not in an embedded store.
            #expect(result.stdout.contains("actions   the account store in PostgreSQL\n"), "\(result.stdout)")
            #expect(try await cluster.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'sets'") == "0", "--connect migrated the store")
            _ = try await run(["store", "migrate", "--store-url", cluster.url])
            result = try await check(["--store-url", cluster.url])
            #expect(result.status == 0 && result.stdout.contains("(current)"), "\(result.stdout) \(result.stderr)")
            result = try await check(["--store-url", cluster.url.replacingOccurrences(of: "/\(cluster.database)?", with: "/nosuchdb?")])
            #expect(result.status == 64 && result.stderr.contains("\"nosuchdb\" does not exist"), "\(result.status) \(result.stderr)")
            result = try await check(["--store-url", "postgres://risc@127.0.0.1:\(try PostgresCluster.freePort())/risc?sslmode=disable"])
            #expect(result.status == 69 && result.stderr.contains("Connection refused"), "\(result.status) \(result.stderr)")
            // The cause in the system's words for an IPv6 address and for a name that does not
            // resolve too (both said nothing after "cannot connect:" before).
            let port = try PostgresCluster.freePort()
            result = try await check(["--store-url", "postgres://risc@[::1]:\(port)/risc?sslmode=disable"])
            #expect(result.status == 69 && result.stderr.contains("[::1]:\(port): Connection refused"), "\(result.status) \(result.stderr)")
            result = try await check(["--store-url", "postgres://risc@nonexistent.invalid/risc?sslmode=disable"])
            #expect(result.status == 69 && result.stderr.contains("cannot resolve nonexistent.invalid: "), "\(result.status) \(result.stderr)")
            // A bad URL is named once.
            result = try await check(["--store-url", "postgres://risc@127.0.0.1:99999/risc"])
            #expect(result.status == 64 && result.stderr.contains("- store.url: port must be 1–65535"), "\(result.status) \(result.stderr)")
        }
    }

    /// Found: `risc store migrate` and `risc store copy` waited for ever on a PostgreSQL they
    /// could not reach (connection refused, or a server that never answers), saying nothing: the
    /// pool queues a query until a connection comes. Every other command said why within seconds.
    @Test("store migrate and store copy say why a PostgreSQL cannot be reached (exit 69), as the other commands do, instead of waiting for ever")
    func unreachableStore() async throws {
        let data = Scratch.root.appendingPathComponent("risc-unreachable-\(UUID().uuidString)").path
        let linked = try await run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42"])
        try #require(linked.status == 0, "\(linked.stderr)")
        // A port nothing listens on, and a server that takes connections and never answers.
        let refused = try PostgresCluster.freePort()
        let (silent, port) = try PostgresCluster.boundLoopbackSocket()
        defer { close(silent) }
        try #require(listen(silent, 16) == 0)
        for (target, cause) in [(refused, "127.0.0.1:\(refused): Connection refused"), (port, "no answer within 5 s")] {
            let url = "postgres://risc@127.0.0.1:\(target)/risc?sslmode=disable"
            for arguments in [["store", "migrate", "--store-url", url], ["store", "copy", "--from", data, "--to", url]] {
                let result = try await RiscBinary.run(arguments, killedAfter: 60)
                #expect(result.status == 69 && result.stderr.contains(cause), "\(arguments): \(result.status) \(result.stderr)")
            }
        }
        // The copy took nothing from the source: its lock is free, no moved-to marker.
        #expect(!FileManager.default.fileExists(atPath: data + "/moved-to"))
        #expect(try await run(["accounts", "list", "--data-dir", data]).status == 0)
    }
}
