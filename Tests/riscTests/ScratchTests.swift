import Foundation
import RISCCore
import RISCTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Finding: a run of `swift test` left 194 files and directories (139 MB: receivers' data
/// directories, event logs, keys, three PostgreSQL clusters) in the system's temporary directory,
/// and every run added as many; a benchmark killed before its end left its work directory (a
/// throwaway cluster's data among it, 1.6 GB after `risc bench serve --store-url throwaway`).
@Suite("Scratch files: a process's temporary files go with it")
struct ScratchTests {
    let tmp: URL

    init() throws {
        tmp = Scratch.root.appendingPathComponent("tmp-\(UUID().uuidString.prefix(8))")  // short: a cluster's socket path must fit in 107 bytes
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
    }

    func left() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: tmp.path).sorted() }

    /// `executable` started from the repository with TMPDIR in this test's directory, its output
    /// thrown away.
    func startQuiet(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = RiscBinary.repository
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": tmp.path]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    @Test("a benchmark killed with -9 with its warden leaves its files; the next risc process removes them, and its own when it ends")
    func killedThenSwept() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        let process = ChildProcess()
        process.executableURL = RiscBinary.url
        process.arguments = ["bench", "log", "--lines", "100000000", "--rounds", "1"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": tmp.path]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Its log file written to: the work directory is made and in use.
        let writing = await waitWhile {
            let found = FileManager.default.enumerator(atPath: tmp.path)?.allObjects.compactMap { $0 as? String } ?? []
            return !found.contains { $0.hasSuffix(".log") }
        }
        #expect(writing)
        // Its warden too (a container stopped, everything in it killed): nothing cleans up then.
        let warden = Scratch.processes(markedWith: tmp.appendingPathComponent("risc-scratch-\(process.processIdentifier)").path).map(\.pid)
        #expect(warden.count == 1)
        for pid in warden { kill(pid, SIGKILL) }
        process.signal(SIGKILL)
        await BlockingPool.waits.run { process.waitUntilExit() }
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(try !left().isEmpty)

        let next = try await RiscBinary.run(["bench", "log", "--lines", "1000", "--rounds", "1"], environment: ["TMPDIR": tmp.path])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try left() == [])
    }

    @Test("the sweep keeps a directory whose process runs or whose owner file is held, and what is not a process's")
    func sweepKeepsTheLiving() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        // A process that has ended: its number is free (nothing reuses it within the test).
        let ended = ChildProcess()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        await BlockingPool.waits.run { ended.waitUntilExit() }
        let gone = ended.processIdentifier
        let another = ChildProcess()
        another.executableURL = URL(fileURLWithPath: "/bin/true")
        try another.run()
        await BlockingPool.waits.run { another.waitUntilExit() }
        let held = another.processIdentifier

        for name in ["risc-scratch-\(gone)/deep/er", "risc-scratch-\(held)", "risc-scratch-1", "risc-scratch-x", "risc-server-\(gone)"] {
            try FileManager.default.createDirectory(at: tmp.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        // The directory of `held` is owned by a process in another PID namespace: it holds the lock.
        let owner = open(tmp.appendingPathComponent("risc-scratch-\(held)/.owner").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        #expect(owner >= 0 && flock(owner, LOCK_EX | LOCK_NB) == 0)
        defer { close(owner) }

        let removed = Scratch.sweep(tmp)
        #expect(removed == [tmp.appendingPathComponent("risc-scratch-\(gone)").path])
        #expect(try left() == ["risc-scratch-1", "risc-scratch-\(held)", "risc-scratch-x", "risc-server-\(gone)"].sorted())
    }

    @Test("this process's own directory: named by its number, its owner file held")
    func ownDirectory() throws {
        #expect(Scratch.root.lastPathComponent == "risc-scratch-\(getpid())")
        let owner = open(Scratch.root.appendingPathComponent(".owner").path, O_RDONLY | O_CLOEXEC)
        #expect(owner >= 0)
        defer { close(owner) }
        #expect(flock(owner, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    }

    /// The processes whose command line names `text` (a receiver's `--data-dir`, a cluster's `-D`).
    static func processes(naming text: String) -> [Int32] {
        let numbers = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
        return numbers.filter { pid in
            // Read to its end: /proc's files have no size for `contents(atPath:)` to go by.
            guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/cmdline"), let line = try? handle.readToEnd() else { return false }
            return String(decoding: line.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self).contains(text)
        }
    }

    // Finding: Ctrl-C on `risc bench serve --store-url throwaway` ended the bench at once and left
    // its receiver serving on the bench's ports (each child runs in a process group of its own,
    // which a terminal's Ctrl-C does not reach), its PostgreSQL cluster running, and its files;
    // the next `risc bench serve` then measured that receiver (1,606 SETs/s, "3308 duplicates",
    // peak RSS 0 MB) and exited 0.
    // Finding (this change's first version): stopped while its receivers ran on the cluster, the
    // bench let its cluster's object go as it unwound, whose clean-up (refused a `pg_ctl`, the
    // process starting no child any more) forgot the cluster: PostgreSQL ran on in a directory
    // removed under it. A drill stopped so crashed once (SIGSEGV) while its exit tore down what
    // the clean-up still used.
    // Finding: a bench or drill killed with -9 (`kill -9`, the OOM killer, a CI job's timeout) ran
    // no clean-up: its receivers served on on the bench's ports and its throwaway cluster ran on
    // (each in a process group and session of its own), and only its directory went, at the next
    // bench's start.
    @Test(
        "Ctrl-C (or kill -9) on a benchmark stops the receivers, load generator and cluster it started and removes its files",
        .enabled(if: PostgresCluster.isAvailable), arguments: ["embedded", "postgresql"], [SIGINT, SIGKILL])
    func stoppedBenchmarkCleansUp(phase: String, signal: Int32) async throws {
        defer {
            for pid in Self.processes(naming: tmp.path) { kill(pid, SIGKILL) }  // what a failure left
            try? FileManager.default.removeItem(at: tmp)
        }
        let (bench, output) = try await startBenchWithCluster(phase: phase)
        defer { try? FileManager.default.removeItem(at: output) }
        bench.signal(signal)
        await BlockingPool.waits.run { bench.waitUntilExit() }
        #expect(bench.terminationReason == .uncaughtSignal && bench.terminationStatus == signal)
        guard signal == SIGKILL else {
            // Ended by the signal only once all it started had stopped.
            #expect(Self.processes(naming: tmp.path) == [])
            #expect(try left() == [])
            return
        }
        // The warden's work, once the bench has gone; it says so last (CI once read its output
        // between the directory's removal and the line).
        let cleaned = await waitWhile(upTo: 60) { !Self.processes(naming: tmp.path).isEmpty || !((try? left()) ?? []).isEmpty }
        #expect(cleaned, "still running: \(Self.processes(naming: tmp.path)), left: \((try? left()) ?? [])")
        func said() -> String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
        #expect(await waitWhile(upTo: 30) { !said().contains("ended without stopping what it started") }, "\(said().suffix(2_000))")
    }

    /// `risc bench serve --store-url throwaway` started, with TMPDIR in this test's directory and its
    /// output in a file, and waited for until its cluster and a receiver of `phase` (on the embedded
    /// store, or on the cluster) run.
    func startBenchWithCluster(phase: String) async throws -> (bench: ChildProcess, output: URL) {
        let output = Scratch.root.appendingPathComponent("risc-bench-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let bench = ChildProcess()
        bench.executableURL = RiscBinary.url
        bench.arguments = [
            "bench", "serve", "--store-url", "throwaway", "--runs", "1", "--duration", phase == "embedded" ? "60" : "8", "--tokens", "2000",
            "--port", try DrillCommandTests.port(count: 4),
        ]
        bench.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": tmp.path]) { $1 }
        bench.standardOutput = try FileHandle(forWritingTo: output)
        bench.standardError = bench.standardOutput
        try bench.run()
        let receiver = phase == "embedded" ? "/data-embedded-" : "--store-url postgres"
        let started = await waitWhile(upTo: 120) {
            let running = Self.processes(naming: tmp.path)
            let names = running.compactMap { ProcStat(path: "/proc/\($0)/stat")?.name }
            return !(names.contains("postgres") && !Self.processes(naming: receiver).filter(running.contains).isEmpty && bench.isRunning)
        }
        #expect(started, "\((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
        return (bench, output)
    }

    // Finding: with another process answering on the bench's ports, `risc bench serve` measured it
    // (its own receiver could not listen and ended; the other answered `/readyz`) and exited 0.
    @Test("a benchmark refuses ports another process listens on, naming them, instead of measuring that process")
    func takenPortsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        // Picked free, then bound: another test may take the port in between (CI, once), so again.
        var bound: (port: Int, server: LoopbackHTTPServer, admin: LoopbackHTTPServer)?
        for _ in 0..<5 where bound == nil {
            let port = Int(try DrillCommandTests.port(count: 2))!
            guard let server = try? LoopbackHTTPServer(port: port, handler: { _ in .init(status: 202) }) else { continue }
            guard let admin = try? LoopbackHTTPServer(port: port + 1, handler: { _ in .json(#"{"status":"ready"}"#) }) else {
                server.stop()
                continue
            }
            bound = (port, server, admin)
        }
        let (port, other, otherAdmin) = try #require(bound)
        defer { other.stop() }
        defer { otherAdmin.stop() }
        let result = try await RiscBinary.run(
            ["bench", "serve", "--runs", "1", "--duration", "1", "--tokens", "200", "--port", "\(port)"], environment: ["TMPDIR": tmp.path])
        #expect(result.status != 0, "\(result.stdout)")
        #expect(result.stderr.contains("port \(port) on 127.0.0.1 is taken"), "\(result.stderr)")
        #expect(!result.stdout.contains("SETs/s acknowledged"))
    }

    // Finding (2026-11-29): with its output and the receivers' logs in one file (`> out 2>&1`), a
    // bench's lines came after every log line of every run, its stdout written in blocks; one cut
    // "µs" in two when the block filled while a receiver logged.
    @Test("a bench's own lines reach a file in step with its receivers' logs, each whole")
    func outputLineByLine() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        let file = tmp.appendingPathComponent("bench.out").path
        let port = try DrillCommandTests.port(count: 2)
        let result = try await RiscBinary.run(
            ["-c", "exec \"$0\" bench serve --runs 2 --duration 1 --tokens 200 --port \(port) > \"$1\" 2>&1", RiscBinary.url.path, file],
            executable: URL(fileURLWithPath: "/bin/sh"), environment: ["TMPDIR": tmp.path])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = String(decoding: try Data(contentsOf: URL(fileURLWithPath: file)), as: UTF8.self).split(separator: "\n")
        let firstFigures = lines.firstIndex { $0.contains("SETs/s acknowledged") }
        let starts = lines.indices.filter { lines[$0].contains("risc starting") }
        try #require(firstFigures != nil && starts.count == 2, "\(lines)")
        #expect(firstFigures! < starts[1], "run 1's figures after run 2's receiver started: \(lines)")
        // Every line is one writer's: a receiver's log line starts one, never follows a bench's text.
        let logged = lines.filter { $0.contains("notice risc:") }
        #expect(logged.count >= 8 && logged.allSatisfy { $0.hasPrefix("20") && $0.components(separatedBy: "notice risc:").count == 2 }, "\(lines)")
    }

    // Finding (in this change's own review): the handlers took SIGHUP even from a bench started
    // under `nohup`, which a closed terminal then stopped.
    @Test("under nohup a bench keeps running through SIGHUP; SIGTERM then stops it")
    func nohupKeepsHangupIgnored() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        // Long enough that it cannot end by itself while a loaded machine holds this test back
        // (a suite stalled for a minute once let a 60-second bench finish before the hangup).
        let bench = try startQuiet("/usr/bin/nohup", [RiscBinary.url.path, "bench", "verify", "--seconds", "600", "--no-openssl"])
        defer { bench.signal(SIGKILL) }
        #expect(await Self.handlesSIGTERM(bench))
        bench.signal(SIGHUP)
        // Still running a while after the hangup (nohup execs risc: the same process).
        let ended = await waitWhile(upTo: 1) { bench.isRunning }
        #expect(!ended)
        bench.signal(SIGTERM)
        await BlockingPool.waits.run { bench.waitUntilExit() }
        #expect(bench.terminationReason == .uncaughtSignal && bench.terminationStatus == SIGTERM)
    }

    /// Whether `process` came to catch or ignore SIGTERM (its handlers in place) while running.
    static func handlesSIGTERM(_ process: ChildProcess) async -> Bool {
        let handled = await waitWhile {
            let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
            let masks = status.split(separator: "\n").filter { $0.hasPrefix("SigIgn:") || $0.hasPrefix("SigCgt:") }
                .compactMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) }
            return !masks.contains { $0 & (1 << UInt64(SIGTERM - 1)) != 0 } && process.isRunning
        }
        return handled && process.isRunning
    }

    /// Found: SIGTERM (or Ctrl-C) on `risc bench serve` while it signed its tokens did nothing
    /// until the signing ended (minutes for a large `--tokens`): the handler waited for a thread
    /// of the pool the signing tasks held. And `--tokens 9223372036854775807` signed on into
    /// gigabytes of memory; it has an upper end now.
    @Test("a bench stops on SIGTERM while it signs its tokens, its files removed; --tokens has an upper end")
    func stopsWhileSigning() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        let tooMany = try await RiscBinary.run(["bench", "serve", "--tokens", "9223372036854775807"])
        #expect(tooMany.status == 64 && tooMany.stderr.contains("--tokens must be from 1 to 2000000"), "\(tooMany.stderr)")
        let bench = try startQuiet(RiscBinary.url.path, ["bench", "serve", "--tokens", "2000000", "--port", "19871"])
        defer { bench.signal(SIGKILL) }
        // Signing: its handlers in place, the work directory there and the process busy.
        #expect(await Self.handlesSIGTERM(bench))
        #expect(await waitWhile { ((try? left()) ?? []).isEmpty || !bench.isRunning } && bench.isRunning)
        bench.signal(SIGTERM)
        let stopped = await waitWhile(upTo: 20) { bench.isRunning }
        #expect(stopped, "still signing 20 s after SIGTERM")
        if stopped {
            #expect(bench.terminationReason == .uncaughtSignal && bench.terminationStatus == SIGTERM)
            let remaining = try left()
            #expect(remaining.isEmpty, "left \(remaining)")
        }
    }

    // Finding: with a long TMPDIR, a throwaway cluster's socket path passed what a Unix socket
    // holds, and the bench failed with pg_ctl's "Examine the log output" and nothing else.
    @Test("a throwaway cluster whose socket path would be too long is refused naming TMPDIR", .enabled(if: PostgresCluster.isAvailable))
    func longTemporaryDirectory() async throws {
        defer { try? FileManager.default.removeItem(at: tmp) }
        let long = tmp.appendingPathComponent(String(repeating: "d", count: 70))
        try FileManager.default.createDirectory(at: long, withIntermediateDirectories: true)
        let result = try await RiscBinary.run(
            ["bench", "actions", "--store-url", "throwaway", "--accounts", "10", "--events", "10"], environment: ["TMPDIR": long.path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("set TMPDIR to a shorter directory"), "\(result.stderr)")
        #expect(Self.processes(naming: tmp.path) == [])
    }
}
