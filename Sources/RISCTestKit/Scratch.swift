public import Foundation
public import RISCCore
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
            guard let pid = owner(ofDirectoryNamed: name), pid != getpid() else { continue }
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

/// The scratch warden: what a benchmark or drill killed with -9 (the OOM killer, a CI job's
/// timeout) leaves running is stopped all the same. Such a process runs no handler: its receivers,
/// load generators and peers (each in a process group of its own) and its clusters (in a session
/// of their own) ran on, serving on the bench's ports.
///
/// `startWarden` marks every process started from then on (the environment variable `markVariable`
/// names this process's directory) and starts `risc scratch-warden`, which waits on a pipe whose
/// writing end only this process holds: when the process ends, however it ends, the warden reads
/// its end of the pipe to its end and runs `ward`. After an ordinary end there is nothing to do.
extension Scratch {
    /// Set to `root`'s path in this process's environment and so in every child's (PostgreSQL
    /// writes its process titles over its environment: clusters are found by their directory).
    /// Not `RISC_…`: the drill passes its receivers no `RISC_` variable of its own.
    public static let markVariable = "_RISC_SCRATCH"

    /// Marks the children to come and starts the warden (once; a failure to start it is said on
    /// standard error, and the process goes on without).
    public static func startWarden() {
        warden.withLock { warden in
            guard warden == nil else { return }
            setenv(markVariable, root.path, 1)
            let pipe = Pipe()
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = ["scratch-warden"]
            process.standardInput = pipe
            process.standardOutput = FileHandle.nullDevice
            process.tracked = false
            do { try process.run() } catch {
                FileHandle.standardError.write(Data("risc: no scratch warden (\(error)): a kill -9 would leave this run's processes running\n".utf8))
                return
            }
            warden = pipe.fileHandleForWriting  // held until the process ends
        }
    }

    private static let warden = Mutex<FileHandle?>(nil)

    /// Whether `path` names a process's scratch directory (absolute, `…/risc-scratch-PID`): the
    /// only kind the warden stops processes for and removes.
    public static func isDirectoryOfAProcess(_ path: String) -> Bool {
        path.hasPrefix("/") && owner(ofDirectoryNamed: (path as NSString).lastPathComponent) != nil
    }

    /// The process number a directory's name `risc-scratch-PID` holds; nil for another name.
    static func owner(ofDirectoryNamed name: String) -> pid_t? {
        guard name.hasPrefix(prefix), let pid = pid_t(name.dropFirst(prefix.count)), pid > 0 else { return nil }
        return pid
    }

    /// The running processes (not this one, no zombie) a bench or drill with the scratch directory
    /// `directory` started: marked by `markVariable` in their environment.
    public static func processes(markedWith directory: String) -> [(pid: Int32, stat: ProcStat)] {
        let mark = Array("\(markVariable)=\(directory)".utf8)
        return ProcStat.processes().filter { process in
            // Read to its end: /proc's files have no size for `contents(atPath:)` to go by.
            guard process.pid != getpid(), process.stat.state != "Z",
                let file = FileHandle(forReadingAtPath: "/proc/\(process.pid)/environ"), let environment = try? file.readToEnd()
            else { return false }
            return environment.split(separator: 0).contains { Array($0) == mark }
        }
    }

    /// The warden's work, in the process `startWarden` started: waits until standard input ends
    /// (the process that started it has ended), then stops the processes marked with `directory`
    /// (SIGTERM, SIGKILL after `grace` seconds), the clusters in it, and removes it. Returns what it
    /// did, nil when there was nothing to do (the process had stopped everything).
    public static func ward(directory: String, grace: Double = 5) -> String? {
        guard isDirectoryOfAProcess(directory) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = read(0, &buffer, buffer.count)
            if count == 0 || (count < 0 && errno != EINTR) { break }
        }
        // PostgreSQL's processes are stopped as a cluster, after the receivers (SIGTERM to a postmaster
        // waits for its clients; to a backend it ends a receiver's connection).
        func marked(postgres: Bool = false) -> [Int32] {
            Scratch.processes(markedWith: directory).filter { postgres || $0.stat.name != "postgres" }.map(\.pid)
        }
        // The receivers before their clusters, as the signal's clean-up does.
        let processes = marked()
        for pid in processes { kill(pid, SIGTERM) }
        ChildProcess.pollWhile(upTo: grace) { !marked().isEmpty }
        for pid in marked() { kill(pid, SIGKILL) }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let clusters = names.filter { $0.hasPrefix("risc-pg-") }.map { directory + "/" + $0 }
            .filter { FileManager.default.fileExists(atPath: $0 + "/data/postmaster.pid") }
        PostgresCluster.stopClusters(in: clusters, within: grace)
        for pid in marked(postgres: true) { kill(pid, SIGKILL) }  // a server whose directory has gone
        let existed = FileManager.default.fileExists(atPath: directory)
        try? FileManager.default.removeItem(atPath: directory)
        guard !processes.isEmpty || !clusters.isEmpty || existed else { return nil }
        let (p, c) = (processes.count, clusters.count)
        return "stopped \(p) process\(p == 1 ? "" : "es") and \(c) cluster\(c == 1 ? "" : "s"), removed \(directory)"
    }
}
