import Foundation
import RISCTestKit
import Testing

/// Found: a data directory whose `risc.sqlite3` was not a database (another file copied in its
/// place), was damaged (cut short), or was a directory made `risc serve` say `Error: PRAGMA
/// journal_mode = WAL: file is not a database` and exit 1, which the shipped unit restarts every few
/// seconds forever; the commands said `Error: step: file is not a database`. Neither named the file
/// nor what to do.
@Suite("a store file that cannot be a store (the built binary)")
struct DamagedStoreTests {
    enum Kind: String, CaseIterable {
        case notADatabase = "not a database", cutShort = "cut short", directory = "a directory"
    }

    /// A data directory whose store is of `kind`.
    static func dataDirectory(_ kind: Kind) async throws -> String {
        let data = Scratch.root.appendingPathComponent("risc-damaged-\(UUID().uuidString)").path
        let store = data + "/risc.sqlite3"
        switch kind {
        case .notADatabase:
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            try Data((0..<65_536).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }).write(to: URL(fileURLWithPath: store))
        case .cutShort:
            // A store risc made, then cut after its first page, as a lost disk write leaves one.
            let made = try await RiscBinary.run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42"])
            try #require(made.status == 0, "\(made.stderr)")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: store))
            try handle.truncate(atOffset: 5_000)
            try handle.close()
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) }
        case .directory:
            try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        }
        return data
    }

    @Test("serve, serve --check-config --connect and the commands refuse it (exit 64, not restarted), naming the file and what to do", arguments: Kind.allCases)
    func refused(_ kind: Kind) async throws {
        let data = try await Self.dataDirectory(kind)
        defer { try? FileManager.default.removeItem(atPath: data) }
        let store = data + "/risc.sqlite3"
        let serve = ["serve", "--audience", "a", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--jwks-file", "keys/test/jwks.json"]
        for command in [serve, ["serve", "--audience", "a", "--check-config", "--connect"], ["store", "status"], ["queue", "status"]] {
            let result = try await RiscBinary.run(command + ["--data-dir", data])
            let expected = kind == .directory ? "Is a directory" : "restore the last backup"
            #expect(
                result.status == 64 && result.stderr.contains(store) && result.stderr.contains(expected) && !result.stderr.contains("Usage:"),
                "\(kind.rawValue): risc \(command.prefix(2).joined(separator: " ")): \(result.status) \(result.stderr)")
        }
        // Nothing was made or changed in its place.
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: store, isDirectory: &isDirectory) && isDirectory.boolValue == (kind == .directory))
    }

    /// Found the same way: an `events.log` that was a directory stopped `risc serve` with `Error:
    /// Error Domain=NSPOSIXErrorDomain Code=21 "Is a directory"` (exit 1, no path), a `journal` that
    /// was a file with exit 1, and a `token-key` that was a directory was called a key file of mode
    /// 755 to chmod.
    @Test("what risc keeps in the data directory, of the wrong kind, stops serve and --check-config (exit 64), named with what it is for")
    func wrongKinds() async throws {
        for (name, makeDirectory, expected) in [
            ("events.log", true, "is a directory, where risc keeps the event log: move it away"),
            ("journal", false, "is not a directory, where risc keeps the journal: move it away"),
            ("token-key", true, "is a directory, where risc keeps the token key: move it away"),
        ] {
            let data = Scratch.root.appendingPathComponent("risc-kinds-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: data) }
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let path = data + "/" + name
            if makeDirectory {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            } else {
                try Data("x".utf8).write(to: URL(fileURLWithPath: path))
            }
            let serve = ["serve", "--audience", "a", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--jwks-file", "keys/test/jwks.json"]
            for command in [serve, ["serve", "--audience", "a", "--check-config"]] {
                let result = try await RiscBinary.run(command + ["--data-dir", data])
                #expect(
                    result.status == 64 && result.stderr.contains("\(path) \(expected)") && !result.stderr.contains("chmod"),
                    "\(name): \(command.count > 4 ? "serve" : "--check-config"): \(result.status) \(result.stderr)")
            }
        }
    }
}
