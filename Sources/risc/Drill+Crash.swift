import ArgumentParser
import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization

extension RiscCommand.Drill {
    struct Crash: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Kill the server at random moments under load; check every acknowledged SET is stored and applied once.",
            discussion: """
                Starts this binary's `risc serve` on loopback with fresh keys, linked accounts and a fresh data directory; \
                posts distinct valid sessions-revoked SETs from several connections; kills the server with SIGKILL (or \
                --signal TERM) after a random time, restarts it, and repeats. Then it lets the last server drain its \
                queue, stops it with SIGTERM and audits the store: every jti answered 202 must be stored, done, and \
                have its actions recorded; the event log must never show one applied twice; PRAGMA integrity_check ok. \
                With --store-url or --config the receiver runs on PostgreSQL (`throwaway`: a local cluster started for \
                the drill; otherwise an empty database of its own, which it fills with test data).
                """
        )

        @Option(parsing: .unconditional, help: "Kill/restart cycles.") var cycles: Int = 20
        @Option(parsing: .unconditional, help: "Concurrent senders.") var concurrency: Int = 16
        @Option(parsing: .unconditional, help: "Shortest time under load before a kill, seconds.") var minUptime: Double = 0.2
        @Option(parsing: .unconditional, help: "Longest time under load before a kill, seconds.") var maxUptime: Double = 1.2
        @Option(help: "Signal: KILL or TERM.") var signal: String = "KILL"
        @Option(parsing: .unconditional, help: "Linked accounts the SETs are about.") var accounts: Int = 200
        @Option(parsing: .unconditional, help: "Port for the server under test (admin: +1); keep it below the ephemeral range (32768+).") var port: Int = 18_643
        @OptionGroup var scratch: ScratchStoreOption

        func validate() throws {
            try OptionRange.atLeast(1, cycles, "--cycles")
            try OptionRange.atLeast(1, concurrency, "--concurrency")
            try OptionRange.atLeast(1, accounts, "--accounts")
            try OptionRange.port(port, following: 1)
            try OptionRange.within(0.001...3_600, minUptime, "--min-uptime")
            try OptionRange.within(minUptime...3_600, maxUptime, "--max-uptime")
            guard ["KILL", "TERM"].contains(signal.uppercased()) else { throw ValidationError("--signal: KILL or TERM") }
        }

        func run() async throws {
            startBenchOrDrill()
            let work = Scratch.root.appendingPathComponent("risc-drill-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            let data = work.appendingPathComponent("data").path
            let entry = try KeyDirectory.generate(into: work.appendingPathComponent("keys"), algorithm: .rs256, keyID: "drill")
            // The receiver signs a checkpoint of its event log every half second: each start goes on
            // with the tree from the last one (`events.resume`), torn lines and all, and the audit
            // at the end checks the last against the whole log.
            let checkpointKey = try CheckpointKey.generate(name: "drill")
            let checkpointKeyFile = work.appendingPathComponent("keys/checkpoint.key").path
            try PrivateFiles.writeAtomically(checkpointKeyFile, Array(checkpointKey.file.utf8))
            let scratchStore = try await scratch.open(data: data, work: work.appendingPathComponent("shared"))
            defer { scratchStore.close() }
            let repository = try scratchStore.storage.accounts()
            for index in 0..<accounts {
                _ = try await repository.link(
                    AccountLink(subject: "drill-\(index)", userID: "u-\(index)", sessions: ["s-\(index)"]), now: systemNow())
            }
            let server = ChildServer(
                arguments: [
                    "--audience", SETFactory.defaultAudience, "--jwks-file", work.appendingPathComponent("keys/jwks.json").path,
                    "--issuer", SETFactory.defaultIssuer, "--host", "127.0.0.1", "--port", "\(port)", "--data-dir", data,
                    "--set", "event_log_checkpoint_key=\(checkpointKeyFile)", "--set", "event_log_checkpoint_interval=0.5s",
                ] + scratchStore.serveArguments, adminPort: port + 1, errorLog: work.appendingPathComponent("serve.err"))
            let factory = SETFactory(signer: entry.signer)
            let accounts = self.accounts
            let load = DrillLoad(url: "http://127.0.0.1:\(port)/events")
            let loadTask = Task {
                await load.run(concurrency: concurrency) { index in
                    let jti = "crash-\(index)"
                    return (try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("drill-\(index % accounts)"), jti: jti), jti)
                }
            }
            let number: Int32 = signal.uppercased() == "KILL" ? SIGKILL : SIGTERM
            var downtime = 0.0
            var exitStatuses: [Int32] = []
            let started = Date()
            for cycle in 1...cycles {
                try await server.start()
                try await Task.sleep(for: .seconds(Double.random(in: minUptime...maxUptime)))
                let killedAt = Date()
                exitStatuses.append(server.stop(signal: number))
                let acked = load.acknowledged.withLock { $0.count }
                if isatty(STDERR_FILENO) == 1 {
                    FileHandle.standardError.write(Data("\rcycle \(cycle)/\(cycles): \(acked) acknowledged so far".utf8))
                }
                downtime += Date().timeIntervalSince(killedAt)
            }
            if isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\n".utf8)) }
            // The last start: stop the load, let the worker drain the queue, then stop cleanly.
            try await server.start()
            load.stop()
            await loadTask.value
            let admin = try scratchStore.storage.admin()
            let drainStart = Date()
            while Date().timeIntervalSince(drainStart) < 60 {
                let counts = try await admin.counts(now: systemNow())
                if counts.pending == 0, counts.scheduledRetry == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let finalStatus = server.stop(signal: SIGTERM)
            let elapsed = Date().timeIntervalSince(started)

            let acknowledged = load.acknowledged.withLock { $0 }
            let audit = try await admin.audit(acknowledged: acknowledged)
            let eventLog = (data as NSString).appendingPathComponent("events.log")
            let (appliedLines, recovered) = try Self.logCounts(eventLog: eventLog)
            let checkpointNote = FileManager.default.contents(atPath: JSONLinesEventLog.checkpointPath(of: eventLog)).map { String(decoding: $0, as: UTF8.self) }
            let checked = try EventLogAudit.run(
                files: EventLogVerifier.files(of: eventLog), key: try CheckpointVerifier(checkpointKey.key.verifierKey), checkpointNote: checkpointNote,
                trustedNote: nil)
            let chain = checked.summary
            let doubled = appliedLines.values.filter { $0 > 1 }.count
            let logged = acknowledged.filter { appliedLines[$0] != nil }.count
            let counts = load.counts.withLock { $0 }
            print("crash drill: \(scratchStore.name), \(cycles) cycles of SIG\(signal.uppercased()) under load from \(concurrency) connections, \(String(format: "%.1f", elapsed)) s")
            print("  requests sent            \(counts.sent) (\(counts.transport) transport errors and \(counts.unavailable) 5xx while down or starting; \(counts.refused) refused)")
            print("  acknowledged (202)       \(audit.acknowledged)")
            print("  stored                   \(audit.stored) of them (\(audit.rows) rows in all: the rest were in flight at a kill, stored but never acknowledged)")
            print("  lost                     \(audit.lost)")
            print("  applied (store)          \(audit.applied), done \(audit.done), not applied \(audit.notApplied)")
            print("  applied (event log)      \(logged) with an 'applied' line, \(doubled) applied twice, \(audit.acknowledged - logged) lines lost with the process")
            if scratchStore.storage.embedded != nil {
                print("  recovered at a start     \(recovered) (answered from the journal, stored by the next start: docs/storage.md)")
            }
            print("  integrity_check          \(audit.integrity ?? "n/a (PostgreSQL: the server's own)")")
            print(
                "  exit statuses            \(Dictionary(grouping: exitStatuses, by: { $0 }).mapValues(\.count).sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")); final SIGTERM → \(finalStatus)"
            )
            if let problem = chain.problem {
                print("  event log chain          BROKEN: \(problem)")
            } else {
                print("  event log chain          whole: \(chain.lines) lines, seq \(chain.firstSeq ?? 0)–\(chain.lastSeq ?? 0), \(chain.torn.count) torn (a write cut off at a kill, said so)")
            }
            let signed = checked.checkpoint.map { "\($0.size) lines" } ?? "none"
            let why = checked.checkpointProblem.map { ", \($0.reason.rawValue): \($0.detail)" } ?? ""
            print("  last checkpoint          \(checked.result == .verified ? "matches the log" : "\(checked.result)"): \(signed)\(why)")
            print(String(format: "  202 latency              p50 %.1f ms, p99 %.1f ms", percentileMilliseconds(counts.latencies, 0.5), percentileMilliseconds(counts.latencies, 0.99)))
            let sigtermClean = number != SIGTERM || exitStatuses.allSatisfy { $0 == 0 }
            guard audit.passed, doubled == 0, finalStatus == 0, sigtermClean, audit.acknowledged > 0, chain.problem == nil, checked.result == .verified else {
                print("FAILED")
                throw ExitStatus.rejected
            }
            print("PASSED: every acknowledged SET stored and applied, none twice; the event log's chain whole and its last checkpoint signed over it")
        }

        /// How many `applied` lines the event log has per jti, and how many SETs a start recovered
        /// from the embedded store's journal.
        static func logCounts(eventLog path: String) throws -> (applied: [String: Int], recovered: Int) {
            guard let data = FileManager.default.contents(atPath: path) else { return ([:], 0) }
            var counts: [String: Int] = [:]
            var recovered = 0
            for line in data.split(separator: UInt8(ascii: "\n")) {
                guard let record = try? JSONParser.parseObject(Array(line)) else { continue }
                if record["step"] == "received" && record["recovered"] == true { recovered += 1 }
                guard record["step"] == "applied", record["outcome"] == "applied", let jti = record["jti"]?.stringValue else { continue }
                counts[jti, default: 0] += 1
            }
            return (counts, recovered)
        }
    }
}
