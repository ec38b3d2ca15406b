public import Foundation

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
        atexit { Scratch.removeRoot() }
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

    private static func removeRoot() {
        try? FileManager.default.removeItem(at: made)
    }
}
