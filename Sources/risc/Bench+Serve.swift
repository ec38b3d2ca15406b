import ArgumentParser
import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCTestKit

extension RiscCommand.Bench {
    struct ServeBench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Load-test `risc serve`: distinct valid SETs over keep-alive connections with wrk; prints SETs/s, p50, p99, peak RSS.",
            discussion: """
                Starts a loopback discovery document and JWKS with the test keys, this binary's `risc serve` on loopback \
                with a fresh data directory, then wrk \
                (Debian package wrk) with Benchmarks/serve.lua. Every 202 is a SET committed to SQLite with fsync. \
                Build with -c release: swift run -c release risc bench serve
                """
        )

        @Option(parsing: .unconditional, help: "Seconds of load.") var duration: Int = 5
        @Option(
            parsing: .unconditional,
            help:
                "Keep-alive connections (all from 127.0.0.1: past limits.max_connections_per_address the bench raises it for its servers)."
        ) var connections: Int = 32
        @Option(parsing: .unconditional, help: "wrk threads.") var threads: Int = 2
        @Option(parsing: .unconditional, help: "Distinct tokens to sign beforehand (default: enough for 25,000/s).") var tokens: Int?
        @Option(help: "Key directory with an RS256 key.", transform: OptionRange.path) var keys: String = "keys/test"
        @Option(help: "Lua script for wrk.") var script: String = "Benchmarks/serve.lua"
        @Option(parsing: .unconditional, help: "Port for the server under test.") var port: Int = 18_443
        @Option(help: "Reuse (or create) this file of signed tokens instead of signing afresh.", transform: OptionRange.path) var tokenFile: String?
        @Flag(help: "Serve HTTPS in process (a fresh self-signed P-256 certificate; TLS 1.2+), as without a proxy in front.")
        var tls = false

        @Option(help: "Also measure PostgreSQL: `throwaway` starts a local cluster and compares the embedded store, one receiver and two on it.")
        var storeURL: String?

        @Option(parsing: .unconditional, help: "Runs, each against a fresh server and data directory; with more than one, a summary (median and range) follows.")
        var runs: Int = 1

        @Flag(help: "Measure each run twice, with the event log's hash chain and without (event_log_chain=false), and print what the chain costs a SET.")
        var chainCost = false
        @Flag(
            help:
                "Measure each run twice: Google's SETs alone (no transmitters configured), and half of them from an SSF transmitter (CAEP session-revoked, ES256, typ, sub_id) sharing the events path; prints both rates."
        )
        var ssfMix = false
        @Flag(
            help:
                "Measure risc beside issue 30's peers (Benchmarks/peers: a Go receiver keeping events in memory, one group-committing to SQLite, one committing each INSERT), the same tokens and load; prints one table. Builds the peer with Benchmarks/peers/build (Debian's golang-go and its jwt and sqlite3 packages)."
        )
        var compare = false
        @Option(
            help:
                "Beside each measured run, a second client sends SETs signed by an unknown key, each with a kid of its own, at this many a second (issue 30: valid SETs keep their rate and tail); 0: none."
        )
        var junkFlood: Double = 0

        /// What one run measured.
        struct Figures {
            var setsPerSecond: Double
            var p50: Double
            var p99: Double
            var peakRSS: Int
            /// Server CPU a SET, µs.
            var cpuPerSET: Double = 0
            /// SETs the server stored, and the 202s it sent.
            var stored = 0, acknowledged = 0
            /// The load generator's CPU a request, µs: the same work whatever it loads, so a
            /// window in which it rose is one in which this machine ran slower.
            var wrkPerRequest: Double = 0
            /// The longest small write the disk took to make durable beside the load, ms
            /// (`DiskSyncProbe`): every 202 waits for an fsync, so no p99 is below its stalls.
            var longestSync: Double = 0
            /// The share of the machine's CPU time the hypervisor took during the window (`CPUTimes`).
            var stolen: Double = 0
        }

        /// One measured window: first the disk is let go quiet (what the bench did before it, the
        /// last window's data removed, PostgreSQL's checkpoint at DROP DATABASE, a server's new
        /// store, reaches the device otherwise inside the window, and every fsync of the receivers'
        /// waits behind it), then `body` runs with a `DiskSyncProbe` beside it. Prints both,
        /// indented by `indent`.
        static func diskWindow<T>(in directory: URL, indent: String = "", _ body: () async throws -> T) async throws -> (T, longestSync: Double, stolen: Double) {
            let quiet = await DiskSettle.afterSync()
            let probe = DiskSyncProbe(directory: directory)
            let cpuBefore = CPUTimes.current()
            let result: T
            do { result = try await body() } catch {
                _ = await BlockingPool.shared.run { probe.stop() }
                throw error
            }
            let disk = await BlockingPool.shared.run { probe.stop() }
            let stolen = cpuBefore.flatMap { before in CPUTimes.current()?.stolen(since: before) } ?? 0
            print(
                indent
                    + String(
                        format: "disk: %@ %.1f s before the load; beside it %d small syncs, longest %.1f ms, %d past %.0f ms; the host took %.1f %% of the CPU (steal)",
                        quiet.settled ? "quiet after" : "still busy after", quiet.waited, disk.syncs, disk.longest, disk.slow, DiskSyncProbe.slow * 1_000,
                        stolen * 100))
            return (result, disk.longest, stolen)
        }

        func validate() throws {
            try OptionRange.atLeast(1, runs, "--runs")
            try OptionRange.within(1...86_400, duration, "--duration")
            try OptionRange.atLeast(1, threads, "--threads")
            try OptionRange.atLeast(threads, connections, "--connections (wrk holds at least one a thread)")
            if let tokens { try OptionRange.within(1...Self.mostTokens, tokens, "--tokens") }
            // The admin listener, and with --store-url a second receiver and its admin listener.
            try OptionRange.port(port, following: 3)
            // The PostgreSQL comparison drives its receivers with its own generators: no flood there.
            if junkFlood > 0, storeURL != nil { throw ValidationError("--junk-flood is not measured with --store-url") }
        }

        func run() async throws {
            startBenchOrDrill()
            let directory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            guard let entry = directory.entry(for: .rs256) else { throw ValidationError("no RS256 key in \(keys)") }
            let work = Scratch.root.appendingPathComponent("risc-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: work) }

            let count = tokens ?? min(duration * 25_000, Self.mostTokens)
            let tokenFile = self.tokenFile.map(URL.init(fileURLWithPath:)) ?? work.appendingPathComponent("tokens.txt")
            if !FileManager.default.fileExists(atPath: tokenFile.path) {
                let signStart = Date()
                try await Self.signTokens(count: count, signer: entry.signer, into: tokenFile)
                print("signed \(count) distinct RS256 SETs in \(String(format: "%.1f", Date().timeIntervalSince(signStart))) s")
            } else if let note = Self.sequentialJTINote(tokenFile) {
                print(note)
            }

            // Keys come the way they do in production: discovery document, then JWKS, through the cache.
            let issuer = try LocalIssuer(jwks: String(decoding: directory.jwksData, as: UTF8.self), issuer: SETFactory.defaultIssuer)
            defer { issuer.stop() }
            if junkFlood > 0 { try Self.writeJunkTokens(into: work.appendingPathComponent("junk.txt")) }
            if storeURL != nil { return try await runShared(issuer: issuer, tokenFile: tokenFile, work: work) }
            if compare { return try await runCompare(issuer: issuer, tokenFile: tokenFile, work: work) }
            if ssfMix { return try await runSSFMix(issuer: issuer, directory: directory, tokenFile: tokenFile, count: count, work: work) }
            let certificate = tls ? try TestCertificate(directory: work.appendingPathComponent("tls")) : nil
            var all: [Figures] = []
            var unchained: [Figures] = []
            for index in 1...runs {
                if runs > 1 { print("run \(index) of \(runs):") }
                // With --chain-cost, the two alternate which goes first: the second of a pair ran
                // slower in every run here whichever it was (the machine's drift), which one order
                // would count against one side.
                let withoutFirst = chainCost && index % 2 == 0
                func unchainedRun() async throws {
                    print("without the hash chain (event_log_chain=false):")
                    unchained.append(
                        try await measure(
                            issuer: issuer, certificate: certificate, tokenFile: tokenFile, data: work.appendingPathComponent("data-\(index)-unchained"),
                            extra: ["--set", "event_log_chain=false"]))
                }
                if withoutFirst { try await unchainedRun() }
                if chainCost { print("with the hash chain:") }
                all.append(try await measure(issuer: issuer, certificate: certificate, tokenFile: tokenFile, data: work.appendingPathComponent("data-\(index)")))
                if chainCost {
                    if !withoutFirst { try await unchainedRun() }
                    let (with, without) = (all.last!, unchained.last!)
                    print(
                        String(
                            format: "the chain's cost this run: %+.1f µs of server CPU a SET (%.1f with, %.1f without); p99 %.2f ms with, %.2f without; %.0f vs %.0f SETs/s",
                            with.cpuPerSET - without.cpuPerSET, with.cpuPerSET, without.cpuPerSET, with.p99, without.p99, with.setsPerSecond,
                            without.setsPerSecond))
                }
            }
            if runs > 1 {
                func spread(_ values: [Double], _ format: String) -> String {
                    let sorted = values.sorted()
                    let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
                    return String(format: "\(format) (\(format)–\(format))", median, sorted.first!, sorted.last!)
                }
                print(
                    "over \(runs) runs, median (range): \(spread(all.map(\.setsPerSecond), "%.0f")) SETs/s, p50 \(spread(all.map(\.p50), "%.2f")) ms, p99 \(spread(all.map(\.p99), "%.2f")) ms, peak RSS \(all.map(\.peakRSS).max()! / 1024) MB at most"
                )
            }
            if chainCost {
                func median(_ values: [Double]) -> Double {
                    values.count % 2 == 1 ? values[values.count / 2] : (values[values.count / 2 - 1] + values[values.count / 2]) / 2
                }
                let costs = zip(all, unchained).map { $0.cpuPerSET - $1.cpuPerSET }.sorted()
                let tails = zip(all, unchained).map { $0.p99 - $1.p99 }.sorted()
                print(
                    String(
                        format:
                            "the chain over %d runs: %+.1f µs of server CPU a SET (median; %+.1f to %+.1f), p99 %+.2f ms (median; %+.2f to %+.2f); target: under 5 µs a SET (risc bench log measures the chain alone, below this run-to-run noise)",
                        runs, median(costs), costs.first!, costs.last!, median(tails), tails.first!, tails.last!))
            }
            print("target: ≥ 20,000 SETs/s, p99 ≤ 10 ms, RSS ≤ 64 MB (2 cores, load generator included)")
        }

        /// The arguments that let one address hold `connections` (and the junk flood's beside them):
        /// every connection of the bench comes from 127.0.0.1, and past
        /// `limits.max_connections_per_address` the extra ones would be closed on accept and wrk
        /// would measure its reconnections instead of the receiver. None within the default.
        func addressLimit(connections: Int) -> [String] {
            // The flood's connections come from the same loopback address as the load's.
            if junkFlood > 0 { return ["--set", "limits.max_connections_per_address=0"] }
            guard connections > ReceiverConfiguration().maxConnectionsPerAddress else { return [] }
            return ["--set", "limits.max_connections_per_address=\(connections)"]
        }

        /// One run: a fresh `risc serve` on `data`, loaded by wrk; prints its figures.
        func measure(issuer: LocalIssuer, certificate: TestCertificate?, tokenFile: URL, data: URL, extra: [String] = []) async throws -> Figures {
            let server = ChildProcess()
            server.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            server.arguments =
                [
                    "serve", "--audience", SETFactory.defaultAudience, "--discovery-url", issuer.discoveryURL,
                    "--issuer", SETFactory.defaultIssuer, "--host", "127.0.0.1", "--port", "\(port)", "--admin-port", "\(port + 1)",
                    "--data-dir", data.path,
                ] + extra
            if let certificate { server.arguments += ["--tls-cert", certificate.certificatePath, "--tls-key", certificate.keyPath] }
            server.arguments += addressLimit(connections: connections)
            server.standardOutput = FileHandle.nullDevice
            try Self.requireFree([port, port + 1])
            try server.run()
            defer { if server.isRunning { server.terminate() } }
            try await Self.waitForReady(port: port + 1, server: server)

            let ((fields, serverBefore, wrkBefore), longestSync, stolen) = try await Self.diskWindow(in: data.deletingLastPathComponent()) {
                let serverBefore = Self.threadCPU(pid: server.processIdentifier), wrkBefore = Self.childrenCPU()
                return (try await load(tokenFile, work: data.deletingLastPathComponent()), serverBefore, wrkBefore)
            }
            // The metrics count a SET once it is indexed, which follows its 202 by up to the
            // writer's linger (SQLiteEventStore.indexLinger): read until they hold every answer.
            let answered = Int((fields["requests"] ?? 0) - (fields["errors_status"] ?? 0))
            let metrics = await Self.metricsOnceIndexed(port: port + 1, answered: answered)
            let peakRSS = Self.peakRSS(pid: server.processIdentifier)
            let serverAfter = Self.threadCPU(pid: server.processIdentifier), wrkAfter = Self.childrenCPU()
            try await ChildServer.stopMeasured(server)
            // Its blocks' discards (the filesystem may be mounted `discard`) reach the device before
            // the next window: `diskWindow` waits for them.
            try? FileManager.default.removeItem(at: data)

            let requests = fields["requests"] ?? 0, seconds = (fields["duration_us"] ?? 1) / 1e6
            func sum(_ matching: (Substring) -> Bool) -> Int { Self.sum(metrics, matching) }
            func metric(_ name: String) -> Int { sum { $0.hasPrefix(name + " ") } }
            var figures = Figures(
                setsPerSecond: requests / seconds, p50: (fields["p50_us"] ?? 0) / 1000, p99: (fields["p99_us"] ?? 0) / 1000, peakRSS: peakRSS)
            (figures.longestSync, figures.stolen) = (longestSync, stolen)
            let accepted = metric("risc_sets_total{outcome=\"accepted\"}"), duplicates = metric("risc_sets_total{outcome=\"duplicate\"}")
            figures.stored = accepted
            figures.acknowledged = Int(requests - (fields["errors_status"] ?? 0))
            print(
                String(
                    format: "%.0f SETs/s acknowledged (202 after fsync) over %d %@ connections for %.1f s; p50 %.2f ms, p99 %.2f ms, max %.2f ms",
                    figures.setsPerSecond, connections, tls ? "HTTPS" : "HTTP", seconds, figures.p50, figures.p99, (fields["max_us"] ?? 0) / 1000))
            let commits = metric("risc_store_commits_total"), rows = metric("risc_store_rows_total")
            // Connections closed on accept (over a limit), and what wrk saw of them: a run measuring
            // reconnections instead of the receiver says so.
            let refused = sum { $0.hasPrefix("risc_push_connections_refused_total{") }
            print(
                "server: \(accepted) stored, \(duplicates) duplicates, \(Int(fields["errors_status"] ?? 0)) non-202 answers, \(refused) connections refused (wrk: \(Int(fields["errors_socket"] ?? 0)) socket errors); peak RSS \(peakRSS / 1024) MB; \(commits) commits, \(String(format: "%.1f", Double(rows) / Double(max(commits, 1)))) rows each"
            )
            if requests > 0 {
                // CPU a SET, from the server's per-thread times (/proc) and wrk's (rusage of children).
                let server = Self.perSET(before: serverBefore, after: serverAfter, requests: requests)
                figures.cpuPerSET = server.total
                figures.wrkPerRequest = (wrkAfter - wrkBefore) * 1e6 / requests
                print(
                    String(
                        format: "CPU a SET: server %.0f µs (%@), wrk %.0f µs with loading its token file; at 20,000/s two cores allow 100 µs in all",
                        server.total, server.parts, figures.wrkPerRequest))
            }
            return figures
        }

        /// The figures of serve.lua's `RESULT key=value …` line in wrk's output; nil without one.
        static func wrkResult(_ output: String?) -> [String: Double]? {
            guard let line = output?.split(separator: "\n").first(where: { $0.hasPrefix("RESULT") }) else { return nil }
            var fields: [String: Double] = [:]
            for part in line.split(separator: " ").dropFirst() {
                let pair = part.split(separator: "=")
                if pair.count == 2 { fields[String(pair[0])] = Double(pair[1]) }
            }
            return fields
        }

        /// A note when a reused token file was signed by a bench before 2026-12-04, whose SETs had the
        /// jtis `bench-0`, `bench-1`, … (cheaper to index than a receiver's random ones).
        static func sequentialJTINote(_ file: URL) -> String? {
            guard let handle = try? FileHandle(forReadingFrom: file) else { return nil }
            defer { try? handle.close() }
            let head = (try? handle.read(upToCount: 64 << 10)) ?? Data()
            guard let line = head.split(separator: UInt8(ascii: "\n")).first, let jws = try? CompactJWS(String(decoding: line, as: UTF8.self)),
                let jti = (try? SecurityEventToken(payload: jws.payload))?.tokenID, jti.hasPrefix("bench-")
            else { return nil }
            return "note: \(file.path) holds SETs with sequential jtis (bench-0, bench-1, …) from an older bench; they cost the store less "
                + "to index than Google's random ones, so its figures are not comparable with today's: remove the file to sign anew"
        }

        /// The most distinct tokens a bench signs (all held in memory, ~1.4 GB); wrk goes round
        /// the file again when a run needs more.
        static let mostTokens = 2_000_000

        /// Signs `count` distinct SETs into `file`, a line each: Google-shaped sessions-revoked by
        /// `signer`, unless `other` gives the line for an index.
        static func signTokens(
            count: Int, signer: JWSSigner, into file: URL, other: @escaping @Sendable (Int) throws -> String? = { _ in nil }
        ) async throws {
            let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
            let chunks = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        let factory = SETFactory(signer: signer)
                        var lines = ""
                        for index in stride(from: worker, to: count, by: workers) {
                            if let line = try other(index) {
                                lines += line + "\n"
                                continue
                            }
                            // The factory's jti: 128 random bits, as Google's are. A sequence
                            // (`bench-N`, before) filled the jti index's pages in order, ~10 µs
                            // a SET cheaper than the random ones a receiver gets.
                            lines += try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("\(100_000_000 + index)")) + "\n"
                        }
                        return (worker, lines)
                    }
                }
                var all: [(Int, String)] = []
                for try await chunk in group { all.append(chunk) }
                return all.sorted { $0.0 < $1.0 }.map(\.1)
            }
            try Data(chunks.joined().utf8).write(to: file)
        }

        /// `--ssf-mix`: each run measures Google's SETs alone, then (alternating which goes first) a
        /// mix where every other SET comes from an SSF transmitter on the same path, told apart by `iss`.
        func runSSFMix(issuer: LocalIssuer, directory: KeyDirectory, tokenFile: URL, count: Int, work: URL) async throws {
            guard let google = directory.entry(for: .rs256), let ssfKey = directory.entry(for: .es256) else {
                throw ValidationError("--ssf-mix needs an RS256 and an ES256 key in \(keys)")
            }
            let ssfIssuer = try LocalIssuer(jwks: String(decoding: directory.jwksData, as: UTF8.self))
            defer { ssfIssuer.stop() }
            let audience = "https://risc.example.com/bench"
            let mixed = work.appendingPathComponent("mixed-tokens.txt")
            let signStart = Date()
            try await Self.signTokens(count: count, signer: google.signer, into: mixed) { index in
                guard index % 2 == 1 else { return nil }
                let factory = SETFactory(issuer: ssfIssuer.baseURL, audience: audience, signer: ssfKey.signer)
                var claims = factory.claims(type: .sessionRevoked, subject: nil, extra: ["event_timestamp": 1_800_000_000])
                claims["sub_id"] = ["format": "email", "email": .string("user-\(index)@example.com")]
                return try factory.sign(claims, header: ["typ": "secevent+jwt"])
            }
            print("signed \(count) SETs, every other one an SSF transmitter's (ES256), in \(String(format: "%.1f", Date().timeIntervalSince(signStart))) s")
            let config = work.appendingPathComponent("ssf-mix.json")
            let transmitter: JSONObject = [
                "dialect": "ssf", "issuer": .string(ssfIssuer.baseURL), "audiences": [.string(audience)], "algorithms": ["ES256"],
                "discovery_url": .string(ssfIssuer.baseURL + "/.well-known/ssf-configuration"),
            ]
            try Data(JSONValue.object(["transmitters": ["bench": .object(transmitter)]]).serialized.utf8).write(to: config)
            var alone: [Figures] = [], mix: [Figures] = []
            for index in 1...runs {
                if runs > 1 { print("run \(index) of \(runs):") }
                func googleRun() async throws {
                    print("Google's SETs alone:")
                    alone.append(try await measure(issuer: issuer, certificate: nil, tokenFile: tokenFile, data: work.appendingPathComponent("data-\(index)-google")))
                }
                if index % 2 == 1 { try await googleRun() }
                print("half from an SSF transmitter on the same path:")
                mix.append(
                    try await measure(
                        issuer: issuer, certificate: nil, tokenFile: mixed, data: work.appendingPathComponent("data-\(index)-mix"), extra: ["--config", config.path]))
                if index % 2 == 0 { try await googleRun() }
            }
            for (label, figures) in [("Google alone", alone), ("SSF mix", mix)] {
                let rates = figures.map(\.setsPerSecond).sorted(), tails = figures.map(\.p99).sorted()
                print(
                    String(
                        format: "%@: %.0f–%.0f SETs/s, p99 %.2f–%.2f ms, server CPU %.0f–%.0f µs a SET", label, rates.first!, rates.last!, tails.first!, tails.last!,
                        figures.map(\.cpuPerSET).min()!, figures.map(\.cpuPerSET).max()!))
            }
            print("target: the mix within the run-to-run noise of Google's SETs alone (same hot path; issue 29)")
        }

        /// The sum of the lines of Prometheus text `metrics` that `matching` picks (a metric, or one by all its labels).
        static func sum(_ metrics: String, _ matching: (Substring) -> Bool) -> Int {
            metrics.split(separator: "\n").filter(matching).compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
        }

        /// The admin listener's `/metrics` on `port` once the SETs it counts stored (accepted and
        /// duplicate) reach `answered`, or as they are after two seconds (then the bench's stored
        /// count says what is missing).
        static func metricsOnceIndexed(port: Int, answered: Int) async -> String {
            var metrics = ""
            for _ in 0..<40 {
                metrics =
                    (try? await CurlHTTPClient().perform(HTTPRequest(url: "http://127.0.0.1:\(port)/metrics")))
                    .map { String(decoding: $0.body, as: UTF8.self) } ?? ""
                let stored = sum(metrics) { $0.hasPrefix("risc_sets_total{outcome=\"accepted\"} ") || $0.hasPrefix("risc_sets_total{outcome=\"duplicate\"} ") }
                if stored >= answered { break }
                try? await Task.sleep(for: .milliseconds(50))
            }
            return metrics
        }

        /// Waits until `server`'s `/readyz` on `port` answers 200. Fails at once if `server` ends
        /// first: another process answering on the port (a receiver left running by a benchmark
        /// stopped before its end) must not be measured in its place.
        static func waitForReady(port: Int, server: ChildProcess) async throws {
            for _ in 0..<100 {
                guard server.isRunning else {
                    throw ValidationError("the server under test ended (status \(server.terminationStatus)) before it was ready on port \(port)")
                }
                if let response = try? await CurlHTTPClient().perform(HTTPRequest(url: "http://127.0.0.1:\(port)/readyz")),
                    response.status == 200, server.isRunning
                {
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw ValidationError("the server did not become ready")
        }

        /// What to say when wrk printed no result: stopped with the bench by a signal, not
        /// installed, or installed and refusing what it was given (not "install it" then).
        static func wrkMissing() -> ValidationError {
            if Scratch.isCleaningUp { return ValidationError("stopped by a signal") }
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            let installed = path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/wrk") }
            return ValidationError(installed ? "wrk printed no result (it refused its arguments, or was stopped)" : "wrk did not run: install it (apt-get install wrk)")
        }

        /// Refuses ports that another process listens on (or holds), naming them, before a server
        /// under test is started on them: the bench would measure that process instead.
        static func requireFree(_ ports: [Int]) throws {
            for port in ports {
                guard let (fd, _) = try? PostgresCluster.boundLoopbackSocket(port: port, reuseAddress: true) else {
                    throw ValidationError(
                        "port \(port) on 127.0.0.1 is taken (by a receiver that a stopped benchmark left running?): stop that process, or pass --port")
                }
                close(fd)
            }
        }

        /// CPU seconds (user + system) by thread name, event-loop threads counted together.
        static func threadCPU(pid: Int32) -> [String: Double] {
            var byName: [String: Double] = [:]
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for task in tasks {
                guard let stat = ProcStat(path: "/proc/\(pid)/task/\(task)/stat"), let seconds = stat.cpuSeconds else { continue }
                var name = stat.name
                if name.hasPrefix("NIO-") { name = "event loops" } else if name.hasSuffix("default-qos") { name = "tasks" }
                byName[name, default: 0] += seconds
            }
            return byName
        }

        /// Microseconds of CPU a request between two `threadCPU` readings: in all, and the busiest
        /// threads (those over half a microsecond) as `name µs, …`.
        static func perSET(before: [String: Double], after: [String: Double], requests: Double) -> (total: Double, parts: String) {
            let threads = after.map { (name: $0.key, micros: ($0.value - (before[$0.key] ?? 0)) * 1e6 / requests) }.sorted { $0.micros > $1.micros }
            let parts = threads.prefix(5).filter { $0.micros >= 0.5 }.map { "\($0.name) \(String(format: "%.0f", $0.micros))" }
            return (threads.reduce(0) { $0 + $1.micros }, parts.joined(separator: ", "))
        }

        /// CPU seconds (user + system) of every process named `name` (PostgreSQL's server and backends).
        static func processCPU(named name: String) -> Double {
            ProcStat.processes().filter { $0.stat.name == name }.compactMap(\.stat.cpuSeconds).reduce(0, +)
        }

        /// CPU seconds of waited-for child processes (wrk, once it has exited).
        static func childrenCPU() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_CHILDREN.rawValue, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }

        /// VmHWM: the peak resident set size, in KiB.
        static func peakRSS(pid: Int32) -> Int {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
            else { return 0 }
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
    }
}
