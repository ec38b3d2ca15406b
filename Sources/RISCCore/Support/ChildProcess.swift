import CRiscSpawn
public import Foundation
import Synchronization

/// A child process, started the way Foundation's `Process` starts one (its own process group, an
/// empty signal mask, every signal's default action, the same members for what risc uses) but
/// without its look at /proc/self/fd.
///
/// On Linux, `Process.run()` lists /proc/self/fd to find the descriptors to close in the child,
/// and copies each entry's whole 256-byte name out of glibc's 32 KiB directory buffer: with more
/// than about 1,365 descriptors open the last entries sit near the buffer's end and the copy
/// reads past it. Valgrind reports it on every such call; it crashed the test process (SIGSEGV)
/// once the buffer ended a mapping. A receiver holds a descriptor for every connection. Here the
/// child closes every descriptor from 3 up in one system call (`closefrom`), so the number open
/// never matters.
public final class ChildProcess: @unchecked Sendable {  // reason: its settings are set before `run()`, on one thread; the outcome is under `state`
    public var executableURL: URL?
    public var arguments: [String] = []
    /// Nil: this process's environment.
    public var environment: [String: String]?
    /// Nil: this process's working directory.
    public var currentDirectoryURL: URL?
    /// A `Pipe`, a `FileHandle` (`FileHandle.nullDevice` for /dev/null), or nil to share this
    /// process's. The child's end of a `Pipe` is closed here once the child has it, as
    /// Foundation does, so that a read of the other end ends when the child does.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?
    /// False: a child meant to outlive this process (the scratch warden), left out of
    /// `signalEveryGroup`, `stopStarting` and `everyGroupMember`.
    public var tracked = true

    private struct State {
        var pid: pid_t = 0
        /// The raw `waitpid` status once the child has been reaped.
        var status: Int32?
    }
    private let state = Mutex(State())
    /// Every child started and not reaped yet, by pid: each leads a process group of its own, which
    /// a terminal's Ctrl-C does not reach (see `signalEveryGroup`). `refusing`: no child starts
    /// any more (the process is being stopped: `stopStarting`).
    private static let registry = Mutex((unreaped: Set<pid_t>(), refusing: false))

    public init() {}

    public struct SpawnError: Error, CustomStringConvertible {
        public let path: String
        public let code: Int32
        public var description: String { "cannot start \(path): \(String(cString: strerror(code)))" }
    }

    public var processIdentifier: Int32 { state.withLock { $0.pid } }

    /// Starts the child. Throws when it cannot be started (no such file, not executable).
    public func run() throws {
        guard let path = executableURL?.path else { throw SpawnError(path: "", code: ENOENT) }
        let input = Self.descriptor(standardInput, fallback: 0)
        let output = Self.descriptor(standardOutput, fallback: 1)
        let error = Self.descriptor(standardError, fallback: 2)
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        // Started and counted under the registry's lock: `stopStarting` signals every child
        // started before it, and none starts after it.
        let rc = Self.registry.withLock { registry -> Int32 in
            guard !registry.refusing || !tracked else { return ECANCELED }
            let rc = argv.withUnsafeMutableBufferPointer { argv in
                if envp != nil {
                    return envp!.withUnsafeMutableBufferPointer { envp in
                        risc_spawn(&pid, path, argv.baseAddress, envp.baseAddress, currentDirectoryURL?.path, input, output, error)
                    }
                }
                return risc_spawn(&pid, path, argv.baseAddress, nil, currentDirectoryURL?.path, input, output, error)
            }
            if rc == 0 && tracked { registry.unreaped.insert(pid) }
            return rc
        }
        guard rc == 0 else { throw SpawnError(path: path, code: rc) }
        state.withLock { $0.pid = pid }
        (standardInput as? Pipe).map { try? $0.fileHandleForReading.close() }
        (standardOutput as? Pipe).map { try? $0.fileHandleForWriting.close() }
        (standardError as? Pipe).map { try? $0.fileHandleForWriting.close() }
    }

    /// The descriptor the child's standard stream `fallback` comes from: -1 for /dev/null.
    private static func descriptor(_ stream: Any?, fallback: Int32) -> Int32 {
        switch stream {
        case let pipe as Pipe: fallback == 0 ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle: handle === FileHandle.nullDevice ? -1 : handle.fileDescriptor
        default: fallback
        }
    }

    /// Reaps the child if it has ended; true while it runs. Never blocks.
    public var isRunning: Bool {
        state.withLock { state in
            guard state.pid > 0, state.status == nil else { return false }
            var status: Int32 = 0
            let reaped = waitpid(state.pid, &status, WNOHANG)
            if reaped == state.pid {
                state.status = status
            } else if reaped < 0 && errno == ECHILD {
                state.status = 0
            }
            if state.status != nil { _ = Self.registry.withLock { $0.unreaped.remove(state.pid) } }
            return state.status == nil
        }
    }

    /// Blocks until the child has ended (another thread may be asking `isRunning` meanwhile).
    public func waitUntilExit() {
        while isRunning {
            // Waits without reaping (WNOWAIT), outside the lock; `isRunning` then reaps.
            var info = siginfo_t()
            let pid = processIdentifier
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno != EINTR && errno != ECHILD { return }
        }
    }

    /// The exit status, or the number of the signal that ended the child (as Foundation's).
    public var terminationStatus: Int32 {
        let status = state.withLock { $0.status } ?? 0
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F
    }

    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    /// Whether the child exited or a signal ended it.
    public var terminationReason: TerminationReason {
        let status = state.withLock { $0.status } ?? 0
        return status & 0x7F == 0 ? .exit : .uncaughtSignal
    }

    /// Sends SIGTERM, if the child has not been reaped yet (its pid could be another's after that).
    public func terminate() { signal(SIGTERM) }

    /// Sends `signal`, if the child has not been reaped yet.
    public func signal(_ signal: Int32) {
        state.withLock { state in
            if state.pid > 0, state.status == nil { kill(state.pid, signal) }
        }
    }

    /// Sends `signal` to the child's process group (it starts in one of its own), if the child has
    /// not been reaped yet: what it started goes too, whenever it started it (gunicorn forks its
    /// workers after it answers) and wherever it was reparented to.
    public func signalGroup(_ signal: Int32) {
        state.withLock { state in
            if state.pid > 0, state.status == nil { kill(-state.pid, signal) }
        }
    }

    /// SIGKILL to the child's process group; back once the child is reaped and no process of its
    /// group runs any more, or after `seconds`. A worker the child forked (gunicorn's) shares its
    /// listening socket and can outlive the child's reaping by its own teardown (a large heap takes
    /// milliseconds to free): until it ends the port is taken.
    public func killGroupAndWait(upTo seconds: Double = 5) {
        signalGroup(SIGKILL)
        waitUntilExit()
        Self.pollWhile(upTo: seconds, everyMilliseconds: 2) { !groupMembers.isEmpty }
    }

    /// Polls `condition` every `interval` while it holds, for at most `seconds`: for waits on other
    /// processes (a child's group, on the way out of a process) where no clock is injected and no
    /// task suspends.
    public static func pollWhile(upTo seconds: Double, everyMilliseconds interval: UInt32 = 20, _ condition: () -> Bool) {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int64(seconds * 1_000))
        while condition() && clock.now < deadline { usleep(interval * 1_000) }
    }

    /// Sends `signal` to the process group of every child this process started and has not reaped
    /// (a reaped child's number may be another's). Each child starts in a group of its own, so
    /// a terminal's Ctrl-C reaches none of them: a benchmark or drill stopped that way passes it on
    /// with this, or its receivers and load generators run on without it.
    public static func signalEveryGroup(_ signal: Int32) {
        registry.withLock { registry in
            for pid in registry.unreaped { kill(-pid, signal) }
        }
    }

    /// `signalEveryGroup(signal)`, and no child starts after it (`run()` throws): for a process
    /// being stopped, whose own code may still be starting the next one.
    public static func stopStarting(signal: Int32) {
        // Every child started before this is counted; none starts after it.
        registry.withLock { $0.refusing = true }
        signalEveryGroup(signal)
    }

    /// Writes this process's standard output a line at a time (stdio writes it in blocks when it
    /// is a file or a pipe): for a process whose children write to the same file, so that its
    /// lines and theirs come out whole and in the order they were written.
    public static func standardOutputByLines() { risc_stdout_by_lines() }

    /// The processes still running (not zombies) in the groups of the children not reaped yet.
    public static var everyGroupMember: [Int32] {
        let groups = registry.withLock { $0.unreaped }
        guard !groups.isEmpty else { return [] }
        return ProcStat.processes().filter { $0.stat.state != "Z" && $0.stat.processGroup.map(groups.contains) == true }.map(\.pid)
    }

    /// The processes of the child's process group still running (not zombies), the child first
    /// while it runs: what it forked since, read from /proc.
    public var groupMembers: [Int32] {
        let group = processIdentifier
        guard group > 0 else { return [] }
        let members = ProcStat.processes().filter { $0.stat.state != "Z" && $0.stat.processGroup == group }.map(\.pid)
        return members.sorted { ($0 == group ? 0 : 1, $0) < ($1 == group ? 0 : 1, $1) }
    }
}
