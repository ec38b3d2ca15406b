import Foundation
public import RISCCore

/// `DATA_DIR/moved-to`: written by `risc store copy` once an embedded store is copied into
/// PostgreSQL, so that a `risc serve` started on the old data directory by mistake does not take
/// SETs into SQLite while the other receivers write to PostgreSQL (two stores, each missing the
/// other's events). Removing the file is the explicit override.
public enum MovedMarker {
    public static func path(in directory: String) -> String { (directory as NSString).appendingPathComponent("moved-to") }

    /// Records that the store in `directory` was copied to `target` (a URL without secrets).
    public static func write(in directory: String, target: String, now: Double = systemNow()) throws {
        let text = JSONValue.object(["copied_to": .string(target), "at": .string(Timestamp.iso8601(now))]).serialized + "\n"
        try PrivateFiles.writeAtomically(path(in: directory), Array(text.utf8))
    }

    /// The refusal to serve from a moved store, if `directory` holds one.
    public static func refusal(in directory: String) -> StoreError? {
        let file = path(in: directory)
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        let record = (try? JSONParser.parseObject(Array(data))) ?? [:]
        let target = record["copied_to"]?.stringValue ?? "another store"
        let at = record["at"]?.stringValue.map { " on \($0)" } ?? ""
        return StoreError(
            .refused,
            """
            the embedded store in \(directory) was copied to \(target)\(at) by risc store copy: serving from it would split SETs \
            between two stores. Serve from the shared store (store.url), or, to serve from this directory again, remove \(file)
            """)
    }
}
