import Foundation
import RISCCore

#if canImport(Glibc)
import Glibc
#endif

/// The embedded store's claim on its data directory: one `risc serve` at a time.
///
/// Two receivers on one SQLite file would each believe it owns the group-commit writer, the
/// checkpoints and the action queue. `DATA_DIR/risc.lock` is locked with `flock` (per open file,
/// so nothing else this process opens or closes can drop it, unlike the POSIX locks SQLite uses,
/// which `flock` does not disturb) and holds the owner's pid for the message a second one gets.
/// The kernel releases it when the process ends, however it ends: a SIGKILL leaves no stale lock.
/// Commands that only read the store (`risc queue`, `risc accounts`) do not take it.
public final class DataDirectoryLock: @unchecked Sendable {  // reason: `fd` is set once in init; `release` runs once, at shutdown
    public let path: String
    private var fd: Int32

    /// The directory is held by another process: a refusal (exit 64), naming its pid.
    static func inUse(directory: String, owner: String?) -> StoreError {
        StoreError(
            .refused,
            "the data directory \(directory) is in use by another risc serve\(owner.map { " (pid \($0))" } ?? ""): "
                + "one receiver per embedded store; give this one its own data_dir, or stop the other")
    }

    /// Takes the lock, creating the directory (0700) and the lock file (0600) if needed; a holder
    /// of a moment (`LockWait`) is waited out.
    public init(directory: String, wait: LockWait = LockWait()) throws {
        try PrivateFiles.makeDirectory(directory)
        path = (directory as NSString).appendingPathComponent("risc.lock")
        fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link; risc never follows links in its data directory: remove it" : String(cString: strerror(errno))
            throw StoreError(.failed, "cannot open \(path): \(reason)")
        }
        guard wait.lock(fd) else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            let owner = Self.owner(fd)
            close(fd)
            guard busy else { throw StoreError(.failed, "cannot lock \(path): \(reason)") }
            throw Self.inUse(directory: directory, owner: owner)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// The pid of the `risc serve` holding `directory`, if one does (`risc store status`); the
    /// lock is only tested, never kept.
    public static func holder(directory: String) -> String? {
        let path = (directory as NSString).appendingPathComponent("risc.lock")
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return owner(fd) ?? "unknown pid"
    }

    /// The pid the holder wrote into the lock file open as `fd`, if it wrote one.
    private static func owner(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        let owner = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return owner.isEmpty ? nil : owner
    }

    /// Gives the directory up (also done when the lock is released or the process ends).
    public func release() {
        guard fd >= 0 else { return }
        _ = ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
