import ArgumentParser
import Foundation
import RISCClient
import RISCCore
import RISCTestKit

extension RiscCommand.Bench.ServeBench {
    /// `--compare`: risc beside issue 30's peers (`Benchmarks/peers/`), the same tokens and load
    /// on the same cores, one table: rate, p50, p99, CPU a request, rows stored against 202s.
    func runCompare(issuer: LocalIssuer, tokenFile: URL, work: URL) async throws {
        let peer = URL(fileURLWithPath: ".build/peers/go-receiver")
        // Built again when its source is newer than the binary.
        let built = (try? FileManager.default.attributesOfItem(atPath: peer.path)[.modificationDate]) as? Date
        let source = (try? FileManager.default.attributesOfItem(atPath: "Benchmarks/peers/go/main.go")[.modificationDate]) as? Date
        if !FileManager.default.isExecutableFile(atPath: peer.path) || (built ?? .distantPast) < (source ?? .distantPast) {
            guard runWithDefaultSignals(["Benchmarks/peers/build", peer.path]) != nil, FileManager.default.isExecutableFile(atPath: peer.path) else {
                throw ValidationError(
                    "--compare builds the Go peer with Benchmarks/peers/build: apt-get install golang-go golang-github-golang-jwt-jwt-dev golang-github-mattn-go-sqlite3-dev")
            }
        }
        var rows: [String: [(Figures, cpu: Double, stored: Int, acknowledged: Int)]] = [:]
        var peers = ["go-memory": "memory", "go-durable": "durable", "go-autocommit": "autocommit"]
        // The Python peer when its packages are there (Benchmarks/peers/python/requirements.txt, from PyPI).
        if runWithDefaultSignals(["python3", "-c", "import flask, gunicorn, jwt, cryptography; print('peer ready')"])?.contains("peer ready") == true {
            peers["python-memory"] = "python"
        } else {
            print("(no Python peer: python3 -m pip install -r Benchmarks/peers/python/requirements.txt)")
        }
        // With --tls every receiver serves HTTPS itself (keep-alive), with the same certificate.
        let certificate = tls ? try TestCertificate(directory: work.appendingPathComponent("tls")) : nil
        for index in 1...runs {
            if runs > 1 { print("round \(index) of \(runs):") }
            print("risc, durable (fsync before 202):")
            let figures = try await measure(issuer: issuer, certificate: certificate, tokenFile: tokenFile, data: work.appendingPathComponent("data-\(index)"))
            rows["risc", default: []].append((figures, figures.cpuPerSET, figures.stored, figures.acknowledged))
            for (name, mode) in peers.sorted(by: { $0.key < $1.key }) {
                print("\(name):")
                rows[name, default: []].append(
                    try await measurePeer(peer, mode: mode, certificate: certificate, tokenFile: tokenFile, data: work.appendingPathComponent("\(name)-\(index).sqlite3")))
            }
        }
        print("RECEIVER        SETs/s (range)        p50 ms   p99 ms (range)     CPU µs/req   stored/202")
        for name in ["risc"] + peers.keys.sorted() {
            let runs = rows[name] ?? []
            let rates = runs.map(\.0.setsPerSecond).sorted(), tails = runs.map(\.0.p99).sorted()
            let median = rates[rates.count / 2]
            print(
                String(
                    format: "%@ %6.0f (%.0f–%.0f)   %6.2f   %5.2f (%.2f–%.2f)   %8.0f   %d/%d", name.padding(toLength: 15, withPad: " ", startingAt: 0), median, rates.first!, rates.last!,
                    runs.map(\.0.p50).sorted()[runs.count / 2],
                    tails[tails.count / 2], tails.first!, tails.last!, runs.map(\.cpu).sorted()[runs.count / 2], runs.map(\.stored).reduce(0, +),
                    runs.map(\.acknowledged).reduce(0, +)))
        }
        // Issue 30's goals, round by round (each round ran every receiver once, in turn).
        if let risc = rows["risc"], let memory = rows["go-memory"], let durable = rows["go-durable"] {
            let ratios = zip(risc, memory).map { $0.0.setsPerSecond / $1.0.setsPerSecond }.sorted()
            let tails = zip(risc, durable).filter { $0.0.p99 <= $1.0.p99 }.count
            print(
                String(
                    format: "risc at %.2f–%.2f× the memory-only Go peer's rate (goal ≥ 1.0×, met in %d of %d rounds); p99 at or below the durable Go peer's in %d of %d rounds (goal: every round)",
                    ratios.first!, ratios.last!, ratios.filter { $0 >= 1 }.count, ratios.count, tails, risc.count))
        }
        if tls { print("every receiver served HTTPS itself (TLS 1.2+, keep-alive, the same P-256 certificate)") }
        if junkFlood > 0 { print(String(format: "each beside a flood of %.0f junk SETs/s with unknown kids (its own line above each run)", junkFlood)) }
        print("go-memory and python-memory keep nothing across a crash; go-durable commits what waits in one transaction (SQLite WAL, synchronous=FULL), 202 after; go-autocommit one INSERT a request")
    }

    /// One run of a peer (the Go one in `mode`, or the Python one for `python`): started on the
    /// bench port, loaded by wrk with the same script and tokens.
    func measurePeer(_ peer: URL, mode: String, certificate: TestCertificate?, tokenFile: URL, data: URL) async throws -> (
        Figures, cpu: Double, stored: Int, acknowledged: Int
    ) {
        let process = ChildProcess()
        if mode == "python" {
            // Google's sample shape: Flask + PyJWT under gunicorn, two workers.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments =
                ["python3", "-m", "gunicorn", "-w", "2", "--preload", "-b", "127.0.0.1:\(port)"]
                + (certificate.map { ["--certfile", $0.certificatePath, "--keyfile", $0.keyPath] } ?? []) + ["app:app"]
            process.currentDirectoryURL = URL(fileURLWithPath: "Benchmarks/peers/python")
            process.environment = ProcessInfo.processInfo.environment.merging(
                ["RISC_PEER_JWKS": URL(fileURLWithPath: "\(keys)/jwks.json").path, "RISC_PEER_AUD": SETFactory.defaultAudience, "RISC_PEER_ISS": SETFactory.defaultIssuer]
            ) { $1 }
        } else {
            process.executableURL = peer
            process.arguments =
                ["-addr", "127.0.0.1:\(port)", "-jwks", "\(keys)/jwks.json", "-mode", mode, "-db", data.path]
                + (certificate.map { ["-cert", $0.certificatePath, "-key", $0.keyPath] } ?? [])
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try Self.requireFree([port])
        try process.run()
        defer { process.killGroupAndWait() }
        let client = CurlHTTPClient(caBundlePath: certificate?.certificatePath)
        let statsURL = certificate == nil ? "http://127.0.0.1:\(port)/stats" : "https://localhost:\(port)/stats"
        for _ in 0..<100 {
            if (try? await client.perform(HTTPRequest(url: statsURL)))?.status == 200 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        // The process and what it started (gunicorn's workers), by their threads' times, read
        // anew each time: gunicorn forks its second worker after the first one answers.
        func cpu() -> [String: Double] {
            process.groupMembers.map { Self.threadCPU(pid: $0) }.reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) }
        }
        let before = cpu()
        let fields = try await load(tokenFile, work: data.deletingLastPathComponent())
        let after = cpu()
        let stats = (try? await client.perform(HTTPRequest(url: statsURL))).flatMap { try? JSONParser.parseObject($0.body) }
        // Its whole process group, and until none of it runs: a worker left behind (the bench once
        // listed gunicorn's workers before the second was forked), or one still freeing its heap
        // when its parent was reaped, kept the port, and the next receiver could not listen.
        process.killGroupAndWait()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: data.path + suffix) }
        let requests = fields["requests"] ?? 0, seconds = (fields["duration_us"] ?? 1) / 1e6
        let acknowledged = Int(requests - (fields["errors_status"] ?? 0))
        let figures = Figures(setsPerSecond: requests / seconds, p50: (fields["p50_us"] ?? 0) / 1000, p99: (fields["p99_us"] ?? 0) / 1000, peakRSS: Self.peakRSS(pid: process.processIdentifier))
        let cpu = requests > 0 ? Self.perSET(before: before, after: after, requests: requests).total : 0
        let stored = Int(stats?["stored"]?.numberValue ?? -1)
        print(String(format: "%.0f SETs/s; p50 %.2f ms, p99 %.2f ms; CPU %.0f µs a request; %d stored of %d acknowledged", figures.setsPerSecond, figures.p50, figures.p99, cpu, stored, acknowledged))
        return (figures, cpu, stored, acknowledged)
    }

    /// wrk's load from `tokenFile` on the server under test (HTTPS with `--tls`); with
    /// `--junk-flood`, a second wrk sends `work`/junk.txt at that rate beside it, from before the
    /// load starts until after it ends, and what it saw is printed. Returns the load's figures.
    func load(_ tokenFile: URL, work: URL) async throws -> [String: Double] {
        let url = "\(tls ? "https" : "http")://127.0.0.1:\(port)"
        var flood: Task<[String: Double]?, Never>?
        if junkFlood > 0 {
            // wrk pauses each connection after each answer: many connections with a long pause, so
            // an answer's latency is small beside the pause and the rate comes near what was asked
            // (8 connections with 8 ms pauses reached 730–890 of 1,000/s, 50 with 50 ms 896).
            let connections = min(200, max(8, Int((junkFlood / 10).rounded()))), delay = max(1, Int((Double(connections) * 1000 / junkFlood).rounded()))
            let arguments = [
                "wrk", "-t1", "-c\(connections)", "-d\(duration + 1)s", "-s", script, url, "--", work.appendingPathComponent("junk.txt").path, "1", "\(delay)",
            ]
            flood = Task.detached { Self.wrkResult(runWithDefaultSignals(arguments)) }
            try await Task.sleep(for: .milliseconds(300))
        }
        guard
            let fields = Self.wrkResult(
                runWithDefaultSignals([
                    "wrk", "-t\(threads)", "-c\(connections)", "-d\(duration)s", "--latency", "-s", script, url, "--", tokenFile.path, "\(threads)",
                ]))
        else { throw Self.wrkMissing() }
        if let flood, let junk = await flood.value {
            let sent = junk["requests"] ?? 0, seconds = (junk["duration_us"] ?? 1) / 1e6
            print(
                String(
                    format: "beside it: %.0f junk SETs/s with unknown kids (%.0f sent, %.0f refused, p99 %.2f ms)", sent / seconds, sent, junk["errors_status"] ?? 0,
                    (junk["p99_us"] ?? 0) / 1000))
        }
        return fields
    }

    /// 500 SETs signed by a key no issuer published, each with a `kid` of its own, a line each in
    /// `file` (`--junk-flood`, `risc drill junk`).
    static func writeJunkTokens(into file: URL) throws {
        let stranger = try PrivateKey.generate(.rsa(bits: 2048))
        let subject = SETFactory(signer: JWSSigner(key: stranger, algorithm: .rs256, keyID: "x")).accountSubject("x")
        let tokens = try (0..<500).map { index in
            try SETFactory(signer: JWSSigner(key: stranger, algorithm: .rs256, keyID: "unknown-\(index)")).make(type: .sessionsRevoked, subject: subject, jti: "junk-\(index)")
        }
        try Data(tokens.joined(separator: "\n").utf8).write(to: file)
    }
}
