import Foundation
import RISCCore
import RISCTestKit
import Testing

/// The drills as built (debug here, so small): they must pass on a sound receiver. Their full-size
/// figures come from `swift run -c release risc drill …` (README, docs/operations.md).
@Suite("risc drill (the built binary)", .serialized)
struct DrillCommandTests {
    /// Where each drill and bench is told to listen (`PostgresCluster.commandPorts`).
    static func port(count: Int = 2) throws -> String { "\(try PostgresCluster.commandPorts(count: count))" }

    func port() throws -> String { try Self.port() }

    /// Seen in CI: a bench picked its port, signed its SETs for two seconds, then found the port
    /// taken: a test's PostgreSQL cluster had picked the same one meanwhile (both drew from
    /// 20,000–32,000).
    @Test("the ports given to drills, benches and the walkthrough are never ones a test's PostgreSQL cluster may pick")
    func portsApart() throws {
        for _ in 0..<200 {
            let port = try #require(Int(try Self.port()))
            #expect(!PostgresCluster.quietPorts.contains(port) && !PostgresCluster.quietPorts.contains(port + 1), "\(port)")
            let walkthrough = try PostgresCluster.commandPorts(count: 3)
            #expect(!(walkthrough..<walkthrough + 3).contains { PostgresCluster.quietPorts.contains($0) }, "\(walkthrough)")
        }
    }

    @Test("crash: SIGKILL under load, restart; every acknowledged SET stored and applied once")
    func crash() async throws {
        let result = try await RiscBinary.run(["drill", "crash", "--cycles", "3", "--concurrency", "4", "--port", try port()])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("lost                     0"))
        #expect(result.stdout.contains("0 applied twice"))
        #expect(result.stdout.contains("integrity_check          ok"))
        #expect(result.stdout.contains("event log chain          whole"))
        #expect(result.stdout.contains("recovered at a start"))
        // Its event log signed every half second: each start went on from the last checkpoint's state.
        #expect(result.stdout.contains("last checkpoint          matches the log"), "\(result.stdout)")
        #expect(result.stdout.contains("PASSED"))
    }

    @Test("crash --signal TERM: graceful stops under load lose nothing and exit 0")
    func sigterm() async throws {
        let result = try await RiscBinary.run(["drill", "crash", "--cycles", "2", "--signal", "TERM", "--concurrency", "4", "--port", try port()])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("exit statuses            0×2; final SIGTERM → 0"))
        // A graceful stop stores everything its journal holds: nothing is left for the next start.
        #expect(result.stdout.contains("recovered at a start     0 "), "\(result.stdout)")
    }

    @Test("junk: an unknown-kid flood costs at most one key-set fetch per cooldown")
    func junk() async throws {
        // Debug builds are slow and this machine is shared with the test runner: check the fetch
        // bound and that every junk SET was refused; the latency ratio is for release builds.
        let result = try await RiscBinary.run([
            "drill", "junk", "--seconds", "2", "--junk-rate", "800", "--valid-rate", "100", "--cooldown", "1", "--port", try port(),
        ])
        #expect(result.stdout.contains("junk drill:"), "\(result.stdout) \(result.stderr)")
        let fetches = result.stdout.split(separator: "\n").first { $0.contains("key-set fetches during the flood") }
        let numbers = fetches?.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: "()"))) } ?? []
        #expect(numbers.count >= 2 && numbers[0] <= numbers.last!, "\(fetches ?? "")")
        #expect(result.stdout.contains("0 not 202"))
    }

    @Test("issue 30: bench serve --junk-flood sends unknown-kid SETs beside the load, all refused, the valid ones all 202")
    func benchBesideJunk() async throws {
        let result = try await RiscBinary.run([
            "bench", "serve", "--duration", "2", "--tokens", "3000", "--connections", "4", "--junk-flood", "200", "--port", try port(),
        ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("beside it:") }, "\(result.stdout)")
        // "beside it: N junk SETs/s with unknown kids (S sent, R refused, p99 …)"
        let numbers = line.split(separator: "(").last?.split(separator: ",").prefix(2).compactMap { Int($0.split(separator: " ").first ?? "") } ?? []
        #expect(numbers.count == 2 && numbers[0] > 0 && numbers[0] == numbers[1], "\(line)")
        #expect(result.stdout.contains(" 0 non-202 answers"), "\(result.stdout)")
    }

    /// A token file kept from an older bench (`--token-file /tmp/tokens.bin`, as docs/performance.md
    /// reproduces it) still holds `bench-N` jtis: reused without a word, it gave figures that look
    /// like today's and are not.
    @Test("bench serve reusing a token file of sequential bench-N jtis says so; one of random jtis says nothing")
    func benchNamesAnOldTokenFile() async throws {
        let directory = try KeyDirectory(url: RiscBinary.repository.appendingPathComponent("keys/test"))
        let factory = SETFactory(signer: try #require(directory.entry(for: .rs256)).signer)
        for (name, jti) in [("old", { (index: Int) in "bench-\(index)" }), ("new", { (_: Int) in nil as String? })] {
            let tokens = Scratch.root.appendingPathComponent("risc-bench-\(name)-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: tokens) }
            let lines = try (0..<400).map { try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("\(100_000_000 + $0)"), jti: jti($0)) }
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: tokens)
            let result = try await RiscBinary.run(["bench", "serve", "--duration", "1", "--connections", "4", "--port", try port(), "--token-file", tokens.path])
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("sequential jtis") == (name == "old"), "\(name): \(result.stdout)")
        }
    }

    /// Found: the bench's SETs had the jtis `bench-0`, `bench-1`, … in the order they were sent,
    /// which fill the (issuer, jti) index's pages one after the other; Google's jtis are random,
    /// and random ones cost the embedded store ~10 µs more a SET (twice the bytes written a SET).
    @Test("bench serve with more connections than one address may hold by default: none refused, the run measures the receiver, whose SETs carry random 128-bit jtis as Google's do")
    func benchBeyondTheAddressLimit() async throws {
        let tokens = Scratch.root.appendingPathComponent("risc-bench-tokens-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: tokens) }
        let result = try await RiscBinary.run([
            "bench", "serve", "--duration", "1", "--tokens", "2000", "--connections", "40", "--port", try port(), "--token-file", tokens.path,
        ])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("server:") }, "\(result.stdout)")
        #expect(line.contains(" 0 non-202 answers, 0 connections refused (wrk: 0 socket errors)"), "\(line)")

        let jtis = try String(contentsOf: tokens, encoding: .utf8).split(separator: "\n").map { token in
            try #require(try SecurityEventToken(payload: CompactJWS(String(token)).payload).tokenID)
        }
        #expect(jtis.count == 2000 && Set(jtis).count == 2000)
        #expect(jtis.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }, "\(jtis.prefix(3))")
        // In the order they are sent, random keys go up about as often as down.
        let rising = zip(jtis, jtis.dropFirst()).filter { $0 < $1 }.count
        #expect((800...1200).contains(rising), "\(rising) of 1999 rising")
    }
}
