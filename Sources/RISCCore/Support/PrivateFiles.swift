#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files and directories risc creates for its data: readable by its own user only (directories
/// 0700, files 0600), whatever the process's umask. The data directory holds raw SETs, token
/// fingerprints and their key: outside systemd (whose unit sets `UMask=0077`) a default umask of
/// 022 would leave them world-readable.
public enum PrivateFiles {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Creates `path` and any missing parent, each missing one with mode 0700. An existing
    /// directory is left as it is.
    public static func makeDirectory(_ path: String) throws {
        var isDirectory = stat()
        if stat(path, &isDirectory) == 0 {
            guard isDirectory.st_mode & S_IFMT == S_IFDIR else { throw Failure(description: "\(path) exists and is not a directory") }
            return
        }
        let parent = String(path.reversed().drop { $0 == "/" }.drop { $0 != "/" }.reversed())
        if !parent.isEmpty, parent != "/", parent != path { try makeDirectory(parent.hasSuffix("/") ? String(parent.dropLast()) : parent) }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw Failure(description: "cannot create directory \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Creates `path` empty with mode 0600 if it does not exist (so a library that opens it next,
    /// such as SQLite, which gives its -wal and -shm files the same mode, keeps it private).
    ///
    /// An existing file is never opened here: closing a descriptor of a database file drops every
    /// POSIX lock this process holds on it, and another process could then take itself for the
    /// last connection and remove the WAL under ours. `O_EXCL` opens only a file it creates.
    public static func createIfMissing(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0 && errno == EEXIST { return }
        guard fd >= 0 else { throw Failure(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        close(fd)
    }

    /// Replaces `path` with `bytes` atomically (a 0600 temporary file beside it, synced, renamed).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw Failure(description: "cannot write \(temporary): \(reason)")
            }
            written += count
        }
        fsync(fd)
        close(fd)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(description: "cannot replace \(path): \(reason)")
        }
    }
}
