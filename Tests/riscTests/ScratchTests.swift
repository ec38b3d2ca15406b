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
        tmp = Scratch.root.appendingPathComponent("risc-tmpdir-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
    }

    func left() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: tmp.path).sorted() }

    @Test("a benchmark killed with -9 leaves its files; the next risc process removes them, and its own when it ends")
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
}
