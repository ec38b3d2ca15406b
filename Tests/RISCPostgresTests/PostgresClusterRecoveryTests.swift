import Foundation
import Logging
import PostgresNIO
import RISCCore
import RISCPostgres
import RISCTestKit
import Synchronization
import Testing

@Suite("PostgreSQL test cluster: restarts")
struct PostgresClusterRestartTests {
    @Test("a cluster restarts on its port even when something held the port meanwhile (CI of d9f71d9: could not start server)")
    func restartWhilePortHeld() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            // Below the kernel's ephemeral range: no outbound connection or kernel-picked port takes it.
            let range = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
            let ephemeralStart = Int(range.split(whereSeparator: \.isWhitespace).first ?? "") ?? 32_768
            #expect(cluster.port < ephemeralStart, "port \(cluster.port)")
            try await cluster.stop(mode: "immediate")
            // Another process listens on the port for a moment while the cluster is down.
            let (fd, _) = try PostgresCluster.boundLoopbackSocket(port: cluster.port, reuseAddress: true)
            try #require(listen(fd, 1) == 0)
            let holder = Task {
                try await Task.sleep(for: .seconds(2))
                close(fd)
            }
            try await cluster.start()
            try await holder.value
            #expect(try await cluster.psql("SELECT 1") == "1")
        }
    }
}

/// Its own suite, so that its long outage runs beside the other suites rather than after them.
@Suite("PostgreSQL: recovery after a long outage")
struct PostgresRecoveryTests {
    /// The time the test waits without the server: the pool's backoff grows to a fifth of it.
    static let outageSeconds = 75.0

    @Test("issue 26 §2: after a long outage the store takes writes within seconds of the server's return, not after the pool's backoff")
    func recoveryAfterLongOutage() async throws {
        try #require(PostgresCluster.isAvailable, "PostgreSQL is not installed: run scripts/bootstrap --tests")
        try await PostgresCluster.with { cluster in
            let database = PostgresDatabase(url: try PostgresStoreURL(cluster.url), password: nil, logger: PostgresFoundationTests.logger)
            defer { database.close() }
            try await database.migrate()
            let store = PostgresEventStore(database: database)
            // Writable before the outage (asked again while a saturated machine makes one answer late).
            var before = false
            for _ in 0..<30 where !before { before = await store.writability(within: 1).writable }
            #expect(before)
            try await cluster.stop(mode: "immediate")
            // Asked every second, as the health sampler does, while the server is away.
            let clock = ContinuousClock()
            let down = clock.now
            while clock.now - down < .seconds(Self.outageSeconds) {
                #expect(await !store.writability(within: 1).writable)
                try await Task.sleep(for: .seconds(1))
            }
            try await cluster.start()
            let back = clock.now
            var writable = false
            while !writable, clock.now - back < .seconds(60) {
                writable = await store.writability(within: 1).writable
                if !writable { try await Task.sleep(for: .milliseconds(200)) }
            }
            let took = clock.now - back
            print("recovery after a \(Self.outageSeconds) s outage: writable \(took) after the server's return")
            // Before, the pool waited out its backoff (about a fifth of the outage, up to a minute).
            #expect(writable && took < .seconds(6), "writable \(took) after the server's return")
        }
    }
}
