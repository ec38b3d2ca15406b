import Foundation
import RISCCore
import RISCTestKit
import Testing

/// The clean-clone CI of 2026-11-28 ended in SIGSEGV: the test process held about 1,400
/// descriptors (every store a test opens, every server it starts) when a test started a child
/// through Foundation's `Process`, whose `run()` copies whole 256-byte names out of glibc's
/// /proc/self/fd directory buffer and read past its end (valgrind, `Process().run()` with 1,500
/// descriptors open: "Invalid read ... 0 bytes after a block of size 32,816 alloc'd" in
/// `findMaximumOpenFromProcSelfFD`). A crash only when that buffer ends a mapping, so no test can
/// make it happen on demand: these check that nothing starts a child that way any more, and that
/// `ChildProcess` does its work with more descriptors open than the buffer holds.
@Suite struct ChildProcessTests {
    @Test("no source or test starts a child through Foundation's Process: ChildProcess does")
    func noFoundationProcess() throws {
        let root = KeyDirectory.repositoryRoot()
        var found: [String] = []
        for folder in ["Sources", "Tests"] {
            let base = root.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(atPath: base.path))
            while let path = enumerator.nextObject() as? String {
                guard path.hasSuffix(".swift") else { continue }
                let text = try String(contentsOf: base.appendingPathComponent(path), encoding: .utf8)
                guard text.contains("Process") else { continue }
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where line.contains("Process") {
                    let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                    if code.contains(/(^|[^A-Za-z_])Process\(\)|Foundation\.Process\b/) {
                        found.append("\(folder)/\(path):\(number + 1)")
                    }
                }
            }
        }
        #expect(found.isEmpty, "\(found)")
    }

    @Test("with 2,000 descriptors open, a child starts, inherits none of them, and its output and status come back")
    func manyDescriptors() async throws {
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<2_000 {
            let fd = open("/dev/null", O_RDONLY)  // without O_CLOEXEC: a child would inherit it
            try #require(fd >= 0)
            held.append(fd)
        }
        let result = try await BlockingPool.waits.run {
            Result { () throws -> (Int32, String, String) in
                let child = ChildProcess()
                child.executableURL = URL(fileURLWithPath: "/bin/sh")
                // The child's own descriptors: 0, 1, 2 and the one `ls` reads the folder with.
                child.arguments = ["-c", "ls /proc/self/fd | wc -l; echo \"$RISC_CHILD_TEST\" >&2; exit 7"]
                child.environment = ["RISC_CHILD_TEST": "seen", "PATH": "/usr/bin:/bin"]
                child.currentDirectoryURL = URL(fileURLWithPath: "/")
                let out = Pipe(), err = Pipe()
                child.standardOutput = out
                child.standardError = err
                child.standardInput = FileHandle.nullDevice
                try child.run()
                let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                child.waitUntilExit()
                return (child.terminationStatus, stdout, stderr)
            }
        }.get()
        #expect(result.0 == 7)
        #expect(result.1.trimmingCharacters(in: .whitespacesAndNewlines) == "4")
        #expect(result.2 == "seen\n")
    }

    @Test("a signal's end is told apart from an exit; a missing program is an error, not a crash")
    func signalsAndErrors() async throws {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["600"]
        try child.run()
        #expect(child.isRunning)
        child.terminate()
        await BlockingPool.waits.run { child.waitUntilExit() }
        #expect(!child.isRunning)
        #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGTERM)

        let missing = ChildProcess()
        missing.executableURL = URL(fileURLWithPath: "/nonexistent/risc-child")
        #expect(throws: ChildProcess.SpawnError.self) { try missing.run() }
    }

    /// `risc bench serve --compare` listed gunicorn's workers once its first answered and killed
    /// those: the second worker, forked a moment later, outlived the bench's kill and kept the
    /// port, and the next round's receiver could not listen ("the address is in use").
    @Test("signalGroup ends what the child started too, wherever it was reparented; groupMembers lists it", .timeLimit(.minutes(1)))
    func groupSignal() async throws {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        // The subshell starts a sleep and exits: the sleep is no child of the shell any more.
        child.arguments = ["-c", "(sleep 300 &); echo ready; exec sleep 300"]
        let out = Pipe()
        child.standardOutput = out
        child.standardInput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice  // else a sleep left behind holds `swift test`'s pipe
        try child.run()
        defer { child.signalGroup(SIGKILL) }
        var said = Data()
        while !said.contains(UInt8(ascii: "\n")) {
            let more = out.fileHandleForReading.availableData
            if more.isEmpty { break }
            said.append(more)
        }
        let members = child.groupMembers
        try #require(members.count == 2 && members.first == child.processIdentifier, "\(members)")
        let grandchild = members[1]
        // When the test fails: the group outlives its reaped leader while the grandchild runs.
        defer { if !child.groupMembers.isEmpty { kill(-child.processIdentifier, SIGKILL) } }
        child.signalGroup(SIGKILL)
        await BlockingPool.waits.run { child.waitUntilExit() }
        #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)
        // Gone, or a zombie until whoever adopted it reaps it; signalling the child alone left it sleeping.
        let ended = await waitWhile(upTo: 30) {
            guard let stat = ProcStat(path: "/proc/\(grandchild)/stat") else { return false }
            return stat.state != "Z"
        }
        #expect(ended, "the grandchild \(grandchild) still runs")
        #expect(child.groupMembers.isEmpty)
    }

    /// `risc bench serve --compare` killed the Python peer's group and waited for gunicorn's master:
    /// a worker still freeing its heap held the shared listening socket a few milliseconds more, and
    /// the next round's receiver found its port taken (round 3 of 3, 2026-11-29).
    @Test("killGroupAndWait returns once no process of the group runs, a member with a large heap too", .timeLimit(.minutes(1)))
    func killGroupWaitsForTheGroup() async throws {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        // A member with 1 GiB written: its teardown outlasts the shell's by milliseconds.
        let heap = "import time; b = bytearray(b'x') * (1 << 30); print('ready', flush=True); time.sleep(300)"
        child.arguments = ["-c", "python3 -c \"\(heap)\" & exec sleep 300"]
        let out = Pipe()
        child.standardOutput = out
        child.standardInput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        defer { if !child.groupMembers.isEmpty { kill(-child.processIdentifier, SIGKILL) } }
        var said = Data()
        while !said.contains(UInt8(ascii: "\n")) {
            let more = out.fileHandleForReading.availableData
            if more.isEmpty { break }
            said.append(more)
        }
        try #require(String(decoding: said, as: UTF8.self).hasPrefix("ready") && child.groupMembers.count == 2, "\(child.groupMembers)")
        await BlockingPool.waits.run { child.killGroupAndWait() }
        #expect(child.groupMembers.isEmpty, "still running after killGroupAndWait: \(child.groupMembers)")
    }

    @Test("ProcStat: a name with spaces and parentheses, fields by proc(5)'s numbers; nil for a process gone")
    func procStat() throws {
        let file = Scratch.root.appendingPathComponent("risc-procstat-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let fields = (3...24).map { $0 == 3 ? "S" : $0 == 14 ? "\(Int(ticks) * 3)" : $0 == 15 ? "\(Int(ticks))" : "\($0 * 10)" }
        try Data(("4242 (a (b) c) " + fields.joined(separator: " ") + "\n").utf8).write(to: file)
        let stat = try #require(ProcStat(path: file.path))
        #expect(stat.name == "a (b) c")
        #expect(stat.state == "S" && stat.field(4) == "40" && stat.processGroup == 50 && stat.number(24) == 240)
        #expect(stat.cpuSeconds == 4)
        #expect(stat.field(2) == nil && stat.field(25) == nil)
        #expect(ProcStat(path: "/proc/0/stat") == nil)
        #expect(ProcStat(path: "/proc/self/stat")?.field(4).flatMap { Int32($0) } == getppid())
    }
}
