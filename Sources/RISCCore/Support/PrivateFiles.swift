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
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 && errno == EEXIST { return }
        guard fd >= 0 else { throw Failure(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        close(fd)
    }

    /// Replaces `path` with `bytes` atomically: a temporary file beside it, created with mode
    /// 0600 from its first byte (`O_CREAT | O_EXCL | O_NOFOLLOW`: never a file or link someone
    /// planted there), written, synced, renamed over `path`, and the directory synced. At no
    /// moment can another user read what is written (a private key written then chmod-ed was
    /// read 59 times in 60 by a local user).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws {
        var temporary = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw Failure(description: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        // The umask can only take bits away from 0600; make sure of it all the same.
        fchmod(fd, 0o600)
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
        guard fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(temporary)
            throw Failure(description: "cannot sync \(temporary): \(reason)")
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(description: "cannot replace \(path): \(reason)")
        }
        syncDirectory(of: path)
    }

    /// Syncs the directory holding `path`, so a rename into it survives a crash.
    static func syncDirectory(of path: String) {
        let directory = PathText.directory(of: path)
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

extension PrivateFiles {
    /// The files risc keeps in its data directory, none of which may be a symbolic link: each is
    /// opened `O_NOFOLLOW` (a planted `risc.lock` link had its target truncated before).
    public static let dataDirectoryFiles = [
        "risc.lock", "events.log", "token-key", "risc.sqlite3", "risc.sqlite3-wal", "risc.sqlite3-shm", "jwks-cache.json",
    ]

    /// Why the data directory `path` (when it exists) cannot be trusted: a symbolic link among
    /// `dataDirectoryFiles` always; with `checkOwnership`, a directory owned by another user or
    /// writable by group or others (anyone else could plant files in it).
    public static func dataDirectoryProblems(_ path: String, setting: String = "data_dir", checkOwnership: Bool) -> [String] {
        var problems: [String] = []
        var status = stat()
        // Absent, or not a directory (said by the check that needs one, once).
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else { return [] }
        if checkOwnership, let problem = directoryProblem(path, setting: setting) { problems.append(problem) }
        for name in dataDirectoryFiles {
            var file = stat()
            let full = (path.hasSuffix("/") ? path : path + "/") + name
            if lstat(full, &file) == 0, file.st_mode & S_IFMT == S_IFLNK {
                problems.append("\(setting): \(full) is a symbolic link; risc never follows links in its data directory: remove it")
            }
        }
        return problems
    }

    /// Why a directory risc keeps secrets in cannot be trusted: owned by another user, or writable
    /// by group or others (anyone else could plant files in it). nil when fine or absent. Reached
    /// through a symbolic link (`/var/lib/risc` on a larger disk), the directory it leads to is
    /// checked, and the link must be this user's or root's. Found: the link's own mode (777,
    /// which chmod cannot change) was checked, and such a directory refused.
    public static func directoryProblem(_ path: String, setting: String) -> String? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        guard status.st_mode & S_IFMT == S_IFLNK else {
            return ownershipProblem(status, path: path, kind: "directory", forbidden: 0o022).map { "\(setting): \($0)" }
        }
        let link = status
        guard stat(path, &status) == 0 else { return nil }  // a dangling link: named by what opens it
        let shown = "\(path) (a link to \(realPath(path) ?? path))"
        if link.st_uid != geteuid() && link.st_uid != 0 {
            return "\(setting): \(shown) is a link owned by uid \(link.st_uid), not by this user (uid \(geteuid())) or root"
                + " (set accept_insecure_permissions = true to run anyway)"
        }
        return ownershipProblem(status, path: shown, kind: "directory", forbidden: 0o022).map { "\(setting): \($0)" }
    }

    /// The path `path` resolves to, every link followed; nil when it does not resolve.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `directory` with every link in the part of it that exists followed (the rest as given): for
    /// SQLite, which opens no file whose path holds a link (`SQLITE_OPEN_NOFOLLOW` refuses every
    /// one, not only the file's own), so that a data directory on a linked disk opens.
    public static func resolvedDirectory(_ directory: String) -> String {
        var existing = directory, rest: [Substring] = []
        while realPath(existing) == nil {
            let parent = PathText.directory(of: existing)
            guard !parent.isEmpty, parent != existing else { return directory }
            rest.insert(existing.split(separator: "/").last ?? "", at: 0)
            existing = parent
        }
        let base = realPath(existing)!
        return rest.isEmpty ? base : (base == "/" ? "" : base) + "/" + rest.joined(separator: "/")
    }

    /// Why a private key file (the token key, a notice signing key) cannot be trusted: owned by
    /// another user, or readable or writable by group or others. nil when fine or absent.
    public static func keyFileProblem(_ path: String, setting: String) -> String? {
        var status = stat()
        // Not a file (a directory): named as such by what reads it, not taken for a key to chmod.
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
        return ownershipProblem(status, path: path, kind: "key file", forbidden: 0o077).map { "\(setting): \($0)" }
    }

    /// The problem with `status` of `path`: another owner, or any of the `forbidden` mode bits set.
    static func ownershipProblem(_ status: stat, path: String, kind: String, forbidden: mode_t) -> String? {
        let override = " (set accept_insecure_permissions = true to run anyway)"
        if status.st_uid != geteuid() {
            return "\(kind) \(path) is owned by uid \(status.st_uid), not by this user (uid \(geteuid()))" + override
        }
        if status.st_mode & forbidden != 0 {
            let mode = String(status.st_mode & 0o777, radix: 8)
            let what = forbidden == 0o022 ? "writable by group or others" : "readable or writable by group or others"
            let fix = forbidden == 0o022 ? "chmod 0700" : "chmod 0600"
            return "\(kind) \(path) is \(what) (mode \(mode)): \(fix) it" + override
        }
        return nil
    }

    /// The contents of `path`, never through a symbolic link; nil when it cannot be read.
    public static func read(_ path: String, limit: Int = 16 << 20) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= limit {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return bytes }
            bytes += buffer[0..<count]
        }
        return nil
    }
}
