import ArgumentParser
import Foundation
import RISCCore
import RISCLocal

/// A command's input of lines (`risc accounts import`, `risc replay`), numbered from 1 and read
/// again from the start by each `forEach`: a file a chunk at a time (`LogLines`, a `.gz` through
/// gzip; a line of over `longest` bytes is cut there), standard input (`-`), a pipe or a device
/// from the bytes it gave, held, since it cannot be read twice: at most 256 MiB, past which the
/// command says to give a file. A leading UTF-8 byte-order mark is not part of the first line.
struct InputLines {
    let path: String
    let held: [UInt8]?
    let longest: Int

    /// `command`: the verb the refusal of too much standard input names ("write it to a file and import the file").
    init(_ path: String, command: String, longest: Int = 1 << 20) throws {
        (self.path, self.longest) = (path, longest)
        // A pipe (`/dev/stdin`, `<(…)`) or a device cannot be read twice either: held as standard input is.
        var status = stat()
        guard path == "-" || stat(path, &status) == 0 && status.st_mode & S_IFMT != S_IFREG else {
            held = nil
            return
        }
        do { held = FileContents.text(try path == "-" ? FileContents.readStandardInput() : FileContents.read(path)) } catch {
            guard error.reason.hasPrefix("larger than") else { throw ValidationError("\(error)") }
            let what = path == "-" ? "standard input" : path
            throw ValidationError(
                "\(what) holds more than \(FileContents.defaultLimit >> 20) MiB: write it to a file and \(command) the file (read a chunk at a time, whatever its size)")
        }
    }

    func forEach(_ body: (Int, ArraySlice<UInt8>) async throws -> Void) async throws {
        var number = 0
        if let held {
            for line in held.split(separator: 10, omittingEmptySubsequences: false) {
                number += 1
                try await body(number, line)
            }
            return
        }
        // A file that cannot be read is a usage error naming it (exit 64), as `readInput` says it.
        func unreadable(_ error: FileContents.Unreadable) -> ValidationError { ValidationError("cannot read \(error.path): \(error.reason)") }
        let lines: LogLines
        do { lines = try LogLines(path: path, longest: longest, cutting: true) } catch { throw unreadable(error) }
        defer { lines.close() }
        func next() throws -> ArraySlice<UInt8>? {
            do { return try lines.next() } catch { throw unreadable(error) }
        }
        var line = try next()
        while let text = line ?? (lines.rest.isEmpty ? nil : lines.rest) {
            number += 1
            try await body(number, number == 1 && text.starts(with: [0xEF, 0xBB, 0xBF]) ? text.dropFirst(3) : text)
            guard line != nil else { break }  // that was the end without a newline
            line = try next()
        }
    }
}
