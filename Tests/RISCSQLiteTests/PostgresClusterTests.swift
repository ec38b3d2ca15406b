import Foundation
import RISCTestKit
import Testing

/// The throwaway PostgreSQL cluster the PostgreSQL backend's tests and benchmark run on
/// (issue 14): created, durable settings on, crashed with `-m immediate`, recovered.
@Suite("Throwaway PostgreSQL cluster", .serialized)
struct PostgresClusterTests {
    @Test("initdb, start with fsync and synchronous_commit on, a committed row survives an immediate stop, stop")
    func lifecycle() throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        let cluster = try PostgresCluster()
        #expect(try cluster.psql("SHOW fsync") == "on")
        #expect(try cluster.psql("SHOW synchronous_commit") == "on")
        #expect(try cluster.psql("SHOW unix_socket_directories") == cluster.directory)
        try cluster.psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')")
        try cluster.stop(mode: "immediate")
        #expect(throws: PostgresCluster.Failure.self) { try cluster.psql("SELECT 1") }
        try cluster.start()
        #expect(try cluster.psql("SELECT v FROM t") == "kept")
        try cluster.stop()
        #expect(!cluster.running)
    }
}
