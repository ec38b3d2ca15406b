import Foundation
import RISCTestKit
import Testing

/// The throwaway PostgreSQL cluster the PostgreSQL backend's tests and benchmark run on
/// (issue 14): created, durable settings on, crashed with `-m immediate`, recovered.
@Suite("Throwaway PostgreSQL cluster", .serialized)
struct PostgresClusterTests {
    @Test("initdb, start with fsync and synchronous_commit on, a committed row survives an immediate stop, stop")
    func lifecycle() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try await PostgresCluster.make()
        #expect(try await cluster.psql("SHOW fsync") == "on")
        #expect(try await cluster.psql("SHOW synchronous_commit") == "on")
        #expect(try await cluster.psql("SHOW unix_socket_directories") == cluster.directory)
        try await cluster.psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        try await cluster.stop(mode: "immediate")
        await #expect(throws: PostgresCluster.Failure.self) { try await cluster.psql("SELECT 1") }
        try await cluster.start()
        #expect(try await cluster.psql("SELECT v FROM t") == "kept")
        try await cluster.stop()
        #expect(!cluster.running)
    }

    /// CI failed now and then with a receiver's answer late past curl's 10 s (an admin call, a
    /// readiness probe): tests waited for `pg_ctl`, `psql` and `risc` commands on Swift
    /// concurrency's threads, as many as the cores, which every receiver and client in the test
    /// process needs. More waits than cores at once stopped them all. Here more `psql` calls than
    /// cores sleep at once, and this task must still get a thread to see them asleep.
    @Test("waiting for psql, pg_ctl or initdb holds none of Swift concurrency's threads")
    func waitsOffConcurrencyThreads() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let sleepers = ProcessInfo.processInfo.activeProcessorCount + 1
            let sleep = "SELECT pg_sleep(30)"
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<sleepers { group.addTask { _ = try? await cluster.psql(sleep) } }
                var seen = 0
                for _ in 0..<300 where seen < sleepers {
                    seen = Int(try await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE query = '\(sleep)'")) ?? 0
                    if seen < sleepers { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(seen == sleepers, "\(sleepers) psql calls asleep, but this task saw \(seen): their waits held the threads it needed")
                try await cluster.psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = '\(sleep)'")
                try await group.waitForAll()
            }
        }
    }
}
