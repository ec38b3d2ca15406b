import ArgumentParser
import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Synchronization

extension RiscCommand {
    struct Drill: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Failure drills that print their figures and exit 1 when the receiver falls short.",
            discussion: "Build with -c release for figures worth quoting: swift run -c release risc drill crash",
            subcommands: [Crash.self, Junk.self]
        )
    }
}

/// This binary's `risc serve`, started, killed and restarted by the drills.
final class ChildServer: @unchecked Sendable {  // reason: `process` is replaced only by the drill's one task, which also reads it
    let arguments: [String]
    let adminPort: Int
    private(set) var process: ChildProcess?
    let errorLog: URL

    init(arguments: [String], adminPort: Int, errorLog: URL) {
        self.arguments = arguments
        self.adminPort = adminPort
        self.errorLog = errorLog
    }

    static var executable: URL { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath() }

    /// Starts the server and waits until `/readyz` answers 200.
    func start() async throws {
        let process = ChildProcess()
        process.executableURL = Self.executable
        process.arguments = ["serve"] + arguments + ["--admin-port", "\(adminPort)"]
        process.standardOutput = FileHandle.nullDevice
        if !FileManager.default.fileExists(atPath: errorLog.path) { _ = FileManager.default.createFile(atPath: errorLog.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: errorLog)
        handle.seekToEndOfFile()
        process.standardError = handle
        // Child processes must not inherit settings meant for the drill.
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RISC_") }
        try process.run()
        self.process = process
        do {
            try await RiscCommand.Bench.ServeBench.waitForReady(port: adminPort, server: process)
        } catch {
            let log = (try? String(contentsOf: errorLog, encoding: .utf8)) ?? ""
            process.signal(SIGKILL)
            throw ValidationError("the server did not become ready; its last words:\n" + log.split(separator: "\n").suffix(5).joined(separator: "\n"))
        }
    }

    /// Sends `signal` and waits for the process to end; returns its termination status. A server
    /// still running `stopWithin` seconds after the signal is killed (SIGKILL, status 9), and the
    /// drill reports that status instead of waiting without limit.
    @discardableResult
    func stop(signal: Int32) -> Int32 {
        guard let process, process.isRunning else { return process?.terminationStatus ?? 0 }
        process.stopWaiting(signal: signal, within: Self.stopWithin)
        return process.terminationStatus
    }

    /// How long a receiver may take to stop after SIGTERM: its default drain (20 s) and ten more.
    static let stopWithin: Double = 30

    /// Stops a receiver the bench measured (SIGTERM, `stopWithin`); one that had to be killed
    /// gives no figure.
    static func stopMeasured(_ server: ChildProcess) async throws {
        guard await server.stop(within: stopWithin) else {
            throw ValidationError("risc serve did not stop within \(Int(stopWithin)) s of SIGTERM (killed): no figure from a receiver that cannot be stopped")
        }
    }
}

/// Posts SETs from several tasks until stopped, remembering which `jti`s were answered 202.
final class DrillLoad: Sendable {
    struct Counts: Sendable {
        var sent = 0
        var accepted = 0
        var refused = 0
        var unavailable = 0
        var transport = 0
        var latencies: [Double] = []
    }

    let url: String
    let next = Mutex(0)
    let stopped = Mutex(false)
    let acknowledged = Mutex<[String]>([])
    let counts = Mutex(Counts())
    let client = CurlHTTPClient()

    init(url: String) { self.url = url }

    func stop() { stopped.withLock { $0 = true } }

    /// Runs `concurrency` senders; `make(index)` returns the token and its jti (nil: do not track).
    /// `rate` > 0 spaces requests evenly at that many a second overall.
    func run(concurrency: Int, rate: Double = 0, make: @escaping @Sendable (Int) throws -> (token: String, jti: String?)) async {
        let start = Date()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<concurrency {
                group.addTask { [self] in
                    while !stopped.withLock({ $0 }) {
                        let index = next.withLock { value -> Int in
                            defer { value += 1 }
                            return value
                        }
                        guard let (token, jti) = try? make(index) else { return }
                        if rate > 0 {
                            let due = start.addingTimeInterval(Double(index) / rate).timeIntervalSinceNow
                            if due > 0 { try? await Task.sleep(for: .seconds(due)) }
                        }
                        let start = Date()
                        let response = try? await client.perform(
                            HTTPRequest(
                                method: "POST", url: url, headers: [("Content-Type", "application/secevent+jwt")], body: Array(token.utf8),
                                timeout: 10, connectTimeout: 2))
                        let elapsed = Date().timeIntervalSince(start)
                        counts.withLock { counts in
                            counts.sent += 1
                            switch response?.status {
                            case 202?:
                                counts.accepted += 1
                                counts.latencies.append(elapsed)
                            case let status? where status >= 500: counts.unavailable += 1
                            case nil: counts.transport += 1
                            default: counts.refused += 1
                            }
                        }
                        if response?.status == 202, let jti { acknowledged.withLock { $0.append(jti) } }
                        if response == nil { try? await Task.sleep(for: .milliseconds(20)) }
                    }
                }
            }
        }
    }
}

/// The `p`-quantile of `values` (seconds), in milliseconds.
func percentileMilliseconds(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000
}
