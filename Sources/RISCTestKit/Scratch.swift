public import Foundation
import RISCCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where tests, the test kit and the benchmarks' throwaway clusters put their files: one
/// directory per process, `TMPDIR/risc-scratch-PID`, removed when the process exits; one left by
/// a process that is gone (killed, or cut off before its exit) is removed by the next process
/// that makes its own.
///
/// Each test names its own directory under `root` (`risc-server-UUID`, …). Many tests do not
/// remove theirs (a receiver's data directory is still open when the test ends): before this, a
/// suite run left a few hundred directories in the system's temporary directory, PostgreSQL
/// clusters' data among them.
public enum Scratch {
    /// This process's directory, made at first use (mode 0755: the throwaway clusters' `postgres`
    /// user goes through it), after the directories of processes that are gone are swept.
    public static var root: URL { made }

    static let prefix = "risc-scratch-"
    /// Held (`flock`) for the life of the process that made the directory: a process in another
    /// PID namespace sharing the temporary directory keeps its own.
    static let ownerFile = ".owner"

    private static let made: URL = {
        let parent = FileManager.default.temporaryDirectory
        sweep(parent)
        let url = parent.appendingPathComponent(prefix + String(getpid()))
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let owner = open(url.appendingPathComponent(ownerFile).path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        if owner >= 0 { _ = flock(owner, LOCK_EX | LOCK_NB) }  // held until the process ends
        atexit { Scratch.removeRoot() }  // a signal's clean-up holds an exit in a handler of its own
        return url
    }()

    /// Removes the directories under `parent` of processes that are no longer running (no process
    /// has its number, and none holds its owner file); returns their paths. The others are kept.
    @discardableResult
    public static func sweep(_ parent: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? []
        var removed: [String] = []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid > 0, pid != getpid() else { continue }
            guard kill(pid, 0) != 0 && errno == ESRCH else { continue }
            let path = parent.appendingPathComponent(name).path
            let owner = open(path + "/" + ownerFile, O_RDONLY | O_CLOEXEC)
            if owner >= 0 {
                defer { close(owner) }
                guard flock(owner, LOCK_EX | LOCK_NB) == 0 else { continue }
            }
            if (try? FileManager.default.removeItem(atPath: path)) != nil { removed.append(path) }
        }
        return removed
    }

    /// Removes the directory; tried again a few times, since threads of the process still running
    /// at its exit (a receiver's, a command's) may add a file while it goes.
    fileprivate static func removeRoot() {
        for _ in 0..<20 {
            guard (try? FileManager.default.removeItem(at: made)) == nil, FileManager.default.fileExists(atPath: made.path) else { return }
            usleep(50_000)
        }
    }
}

extension Scratch {
    /// For the benchmarks and drills of `risc`: on SIGINT (a terminal's Ctrl-C), SIGTERM or
    /// SIGHUP, what the process started is stopped before it ends: its children's process groups
    /// (receivers, load generators, peers: each in a group of its own, which Ctrl-C does not
    /// reach) get SIGTERM and, after `grace` seconds, SIGKILL, and no child starts after that; then
    /// its throwaway clusters stop (`immediate`) and its directory goes. Then the signal ends the
    /// process as it would have. Without this, a benchmark stopped by Ctrl-C left its receivers
    /// serving on the bench's ports and its cluster running, and the next benchmark measured the
    /// old receiver.
    public static func cleanUpOnSignals(grace: Double = 5) {
        sources.withLock { sources in
            guard sources == nil else { return }
            var made: [any DispatchSourceSignal] = []
            for number in [SIGINT, SIGTERM, SIGHUP] {
                // One already ignored stays so: `nohup` (SIGHUP), a shell's background job (SIGINT).
                let previous = signal(number, SIG_IGN)
                if let previous, unsafeBitCast(previous, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) { continue }
                // A queue of its own: the global one's threads are Swift concurrency's pool, which
                // work on every core (a bench signing its tokens) holds until it ends.
                let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
                source.setEventHandler {
                    cleaning.withLock { $0 = true }
                    // The command's code sees its children end and may call `exit` meanwhile. Exit
                    // handlers run newest first: this one, registered now, holds that exit before
                    // any other tears down what threads still use (the drill crashed, SIGSEGV, when
                    // the wait was in the handler registered at the directory's making).
                    atexit { Scratch.awaitCleanUp() }
                    cleanUp(grace: grace)
                    signal(number, SIG_DFL)
                    // To the process, not this thread (`raise`): Dispatch's threads block signals.
                    kill(getpid(), number)
                }
                source.resume()
                made.append(source)
            }
            sources = made
        }
    }

    /// Stops what the process started and removes its directory (see `cleanUpOnSignals`).
    public static func cleanUp(grace: Double) {
        // The receivers before their clusters: a receiver draining against a stopped server waits
        // out its store's timeout.
        ChildProcess.stopStarting(signal: SIGTERM)
        ChildProcess.pollWhile(upTo: grace) { !ChildProcess.everyGroupMember.isEmpty }
        ChildProcess.signalEveryGroup(SIGKILL)
        PostgresCluster.stopEveryCluster(within: grace)
        removeRoot()
    }

    /// Where the signal handlers run.
    private static let signalQueue = DispatchQueue(label: "risc.scratch.signals")

    /// A signal's clean-up is under way: the process ends by that signal once it is done.
    private static let cleaning = Mutex(false)

    /// Whether a signal is ending the process (its children were stopped on purpose: a load
    /// generator that printed nothing was not missing).
    public static var isCleaningUp: Bool { cleaning.withLock { $0 } }

    /// At exit, once a signal's clean-up has begun (registered then): lets it finish (it then ends
    /// the process by the signal). The command's own code sees its children end under it and exits
    /// meanwhile, which ended the process before its cluster was stopped, or crashed it.
    fileprivate static func awaitCleanUp() {
        for _ in 0..<6_000 { usleep(10_000) }  // a minute at most; the signal ends the process first
    }

    /// The signals' sources, once installed (kept: a source let go stops).
    private static let sources = Mutex<[any DispatchSourceSignal]?>(nil)
}
