import Foundation
import RISCCore
import RISCTestKit

/// Runs the built `risc` executable, as a user would.
enum RiscBinary {
    static let url: URL = {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return directory.appendingPathComponent("risc")
    }()

    static let repository = KeyDirectory.repositoryRoot()

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// `directory`: the working directory (default the repository); `environment`: `RISC_*`
    /// variables added to this process's environment.
    /// `run` on `BlockingPool`'s threads: for a command that takes long (a build), so its wait
    /// never holds one of the cooperative pool's few threads that servers in other tests need.
    static func runOffPool(
        _ arguments: [String], executable: URL? = nil, directory: URL? = nil, environment: [String: String] = [:]
    ) async throws -> Result {
        try await BlockingPool.shared.run {
            Swift.Result { try run(arguments, executable: executable, directory: directory, environment: environment) }
        }.get()
    }

    static func run(
        _ arguments: [String], stdin: String? = nil, executable: URL? = nil, directory: URL? = nil, environment: [String: String] = [:]
    ) throws -> Result {
        let process = Process()
        process.executableURL = executable ?? url
        process.arguments = arguments
        process.currentDirectoryURL = directory ?? repository
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }
}
