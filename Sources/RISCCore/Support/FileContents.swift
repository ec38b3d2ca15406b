#if canImport(Glibc)
import Glibc
#endif

/// Reading a whole file given by a person (a command's argument, a configuration file), with the
/// reason when it cannot be read, as the system gives it.
public enum FileContents {
    /// Why `path` could not be read: `cannot read PATH: REASON`.
    public struct Unreadable: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "cannot read \(path): \(reason)" }
        public init(path: String, reason: String) { (self.path, self.reason) = (path, reason) }
    }

    /// What is read at most unless a caller says otherwise: a device such as `/dev/zero` never ends.
    public static let defaultLimit = 256 << 20

    /// `bytes` of a text file without a leading UTF-8 byte-order mark, which some editors (Windows'
    /// Notepad) put at the start of every file: kept, it became part of a token or a secret, which
    /// then matched nothing. Only for text: a binary file may begin with those bytes.
    public static func text(_ bytes: [UInt8]) -> [UInt8] {
        bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
    }

    /// The bytes of a text file at `path` (`read`), without a leading byte-order mark (`text`): for
    /// every file a person writes or edits (tokens, secrets, key sets, proofs).
    public static func readText(_ path: String, regularFile: Bool = false, limit: Int = defaultLimit) throws(Unreadable) -> [UInt8] {
        text(try read(path, regularFile: regularFile, limit: limit))
    }

    /// The bytes of `path`. Anything that can be read will do (a pipe such as `/dev/stdin` or a
    /// shell's `<(…)`, a device), unless `regularFile`: then only a regular file, found without
    /// waiting for a pipe's writer (a file read again on SIGHUP cannot be a pipe). More than `limit`
    /// bytes is refused.
    public static func read(_ path: String, regularFile: Bool = false, limit: Int = defaultLimit) throws(Unreadable) -> [UInt8] {
        func failure(_ reason: String = String(cString: strerror(errno))) -> Unreadable { Unreadable(path: path, reason: reason) }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | (regularFile ? O_NONBLOCK : 0))
        guard descriptor >= 0 else { throw failure() }
        defer { close(descriptor) }
        if regularFile, let problem = notRegular(descriptor) { throw failure(problem) }
        return try read(descriptor: descriptor, limit: limit, failure: failure)
    }

    /// Why `path` cannot be read as a regular file (the system's words, "Is a directory", "not
    /// a regular file" for a device or a named pipe); nil: it can. Opened without waiting for a
    /// pipe's writer, and nothing is read.
    public static func regularFileProblem(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        return notRegular(descriptor)
    }

    private static func notRegular(_ descriptor: Int32) -> String? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return String(cString: strerror(errno)) }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return String(cString: strerror(EISDIR))
        default: return "not a regular file"
        }
    }

    /// Standard input to its end, bounded like `read`.
    public static func readStandardInput(limit: Int = defaultLimit) throws(Unreadable) -> [UInt8] {
        try read(descriptor: STDIN_FILENO, limit: limit) { Unreadable(path: "standard input", reason: $0) }
    }

    private static func read(descriptor: Int32, limit: Int, failure: (String) -> Unreadable) throws(Unreadable) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw failure(String(cString: strerror(errno))) }
            if count == 0 { return bytes }
            guard bytes.count + count <= limit else { throw failure("larger than \(limit >> 20) MiB") }
            bytes += buffer[0..<count]
        }
    }
}
