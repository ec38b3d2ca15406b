import Foundation
import RISCCore
import RISCTestKit
import Testing

/// Runs the built `risc` executable, as a user would.
enum RiscBinary {
    static let url: URL = {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return directory.appendingPathComponent("risc")
    }()

    static let repository = KeyDirectory.repositoryRoot()

    /// The size of the repository's own `./data/events.log` (0 when there is none): a command run
    /// without a data directory writes its event-log lines there, where the README's receiver
    /// keeps its own. A test that runs commands on a shared store compares it before and after.
    static func repositoryEventLogSize() -> Int {
        let path = repository.appendingPathComponent("data/events.log").path
        return ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs the command to its end. `directory`: the working directory (default the repository);
    /// `environment`: `RISC_*` variables added to this process's environment. It waits on
    /// `BlockingPool.waits`' threads, never on one of Swift concurrency's few, which the receivers
    /// and clients of other tests in this process need meanwhile. A command still running after
    /// `killedAfter` seconds is killed (the test then fails on its status).
    static func run(
        _ arguments: [String], stdin: String? = nil, executable: URL? = nil, directory: URL? = nil, environment: [String: String] = [:],
        killedAfter: Double = 600
    ) async throws -> Result {
        try await BlockingPool.waits.run {
            Swift.Result {
                try runBlocking(
                    arguments, stdin: stdin, executable: executable, directory: directory, environment: environment, killedAfter: killedAfter)
            }
        }.get()
    }

    /// Runs `risc ARGUMENTS` with its standard output in the file `output` and returns its peak
    /// resident memory in KiB (python3's `RUSAGE_CHILDREN` of a process that runs only it). Fails
    /// the test unless it exits 0.
    static func peakMemory(_ arguments: [String], output: URL) async throws -> Int {
        let script = """
            import resource, subprocess, sys
            with open(sys.argv[1], "wb") as out:
                code = subprocess.run(sys.argv[2:], stdout=out).returncode
            print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        let result = try await run(["-c", script, output.path, url.path] + arguments, executable: URL(fileURLWithPath: "/usr/bin/python3"))
        let fields = result.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(fields.count == 2 && fields[0] == 0, "risc \(arguments.joined(separator: " ")): \(result.stdout) \(result.stderr)")
        return fields[1]
    }

    private static func runBlocking(
        _ arguments: [String], stdin: String?, executable: URL?, directory: URL?, environment: [String: String], killedAfter: Double
    ) throws -> Result {
        let process = ChildProcess()
        process.executableURL = executable ?? url
        process.arguments = arguments
        process.currentDirectoryURL = directory ?? repository
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let finished = try process.runToEnd(input: Data((stdin ?? "").utf8)) {
            // A command that hangs is killed (after ten minutes unless told): the test fails on its
            // status instead of holding the suite (`runToEnd` ends when the process does).
            Thread.detachNewThread { [process] in process.stopWaiting(signal: nil, within: killedAfter) }
        }
        return Result(
            status: finished.status, stdout: String(decoding: finished.output, as: UTF8.self),
            stderr: String(decoding: finished.errorOutput, as: UTF8.self))
    }
}
