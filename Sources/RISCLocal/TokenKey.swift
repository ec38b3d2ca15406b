import Foundation
import RISCCore

#if canImport(Glibc)
import Glibc
#endif

/// The key risc fingerprints linked and Google tokens with (HMAC of a token's prefix), and the
/// check that it is the key the store's fingerprints were made with.
///
/// The key lives in a file: `DATA_DIR/token-key` by default (made on first use), or
/// `accounts.token_key_file` (made with `risc keys token-key --out FILE`), for instance to keep it
/// off the data directory's backups or to share it between receivers. The store keeps a check
/// value, HMAC-SHA-256(key, "risc token-key check v1"), which says nothing of the key. Opening a
/// store whose check value does not match the key, or that has one while the key file is missing,
/// is refused: before this, a data directory restored without `token-key` silently got a new key,
/// and no token-revoked event ever matched a stored token again.
public enum TokenKey {
    /// Bytes in a key risc makes.
    public static let length = 32

    /// The check value of `key`.
    public static func checkValue(_ key: [UInt8]) -> String { TokenFingerprint.keyCheckValue(key) }

    /// Writes a new random key to `path` (0600); refuses to replace an existing file.
    public static func create(at path: String) throws -> [UInt8] {
        guard let random = FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: length), random.count == length else {
            throw StoreError(.refused, "cannot read /dev/urandom for the token key")
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError(.refused, errno == EEXIST ? "\(path) exists already: a token key is never overwritten" : "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let bytes = Array(random)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == length, fsync(fd) == 0 else {
            throw StoreError(.refused, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return bytes
    }

    /// `accounts.token_key_file`'s bytes; nil when there is no such file.
    private static func operatorFile(_ path: String) throws -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do { return try FileContents.read(path, regularFile: true, limit: 4_096) } catch { throw StoreError(.refused, "accounts.token_key_file: \(error)") }
    }

    /// The key at `path` (`accounts.token_key_file`, or the data directory's `token-key` when
    /// `dataDirectoryFile`, made on first use), checked against the check value the store
    /// `recorded` (nil: none yet). On first use `record` stores the key's check value and returns
    /// what the store holds then (another receiver may have recorded its own at the same moment).
    public static func load(path: String, dataDirectoryFile: Bool, recorded: String?, record: (String) throws -> String?) throws -> [UInt8] {
        let setting = dataDirectoryFile ? "the data directory's token-key" : "accounts.token_key_file"
        var key: [UInt8]
        // The data directory's own file is never read through a link; an operator's file may be
        // one, and must be a regular file (a named pipe would hold the start for ever).
        if let data = dataDirectoryFile ? PrivateFiles.read(path, limit: 4_096) : try operatorFile(path) {
            key = Array(data)
            guard key.count >= length else { throw StoreError(.refused, "\(setting) \(path) holds \(key.count) bytes; a token key has at least \(length)") }
        } else if let recorded {
            throw StoreError(
                .refused,
                """
                \(setting) \(path) is missing, but this store's token fingerprints were made with a key (check value \(recorded.prefix(12))…): \
                restore that file (it belongs with the data directory's backup); a new key would make every stored token unmatchable
                """)
        } else if !dataDirectoryFile {
            throw StoreError(.refused, "accounts.token_key_file \(path) does not exist: create it with `risc keys token-key --out \(path)`")
        } else {
            do { key = try create(at: path) } catch {
                // Another process made it first: use theirs.
                guard let data = PrivateFiles.read(path, limit: 4_096), data.count >= length else { throw error }
                key = Array(data)
            }
        }
        let check = checkValue(key)
        if let recorded {
            guard TokenFingerprint.constantTimeEquals(recorded, check) else {
                throw StoreError(
                    .refused,
                    """
                    \(setting) \(path) is not the key this store's token fingerprints were made with \
                    (check value \(check.prefix(12))…, the store's \(recorded.prefix(12))…): use the original key file
                    """)
            }
            return key
        }
        // First use: record the check value (a concurrent first use with another key loses here).
        guard let now = try record(check), TokenFingerprint.constantTimeEquals(now, check) else {
            throw StoreError(.refused, "\(setting) \(path) is not the key another receiver recorded for this store at the same moment")
        }
        return key
    }
}
