import Foundation
import Testing

@Suite("Vector copies")
struct VectorCopyTests {
    @Test("every shared vector is copied into the test bundle, byte for byte")
    func copiesMatchShared() throws {
        let shared = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/vectors")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: shared.path))?.filter { $0.hasSuffix(".json") } ?? []
        try #require(!Vectors.names.isEmpty)
        guard !files.isEmpty else { return }  // a clone without shared/ beside it checks its own copies only
        #expect(Set(files.map { String($0.dropLast(5)) }) == Set(Vectors.names))
        for file in files {
            let original = try Data(contentsOf: shared.appendingPathComponent(file))
            let copy = try Data(contentsOf: Vectors.url(String(file.dropLast(5))))
            #expect(original == copy, "\(file) differs from ../shared/vectors")
        }
    }

    @Test("the Wycheproof suites are copied byte for byte")
    func wycheproofCopies() throws {
        let shared = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/vectors/wycheproof")
        let bundled = Bundle.module.resourceURL!.appendingPathComponent("Vectors/wycheproof")
        let copies = try FileManager.default.contentsOfDirectory(atPath: bundled.path).filter { $0.hasSuffix(".json") }
        #expect(Set(copies) == ["json_web_signature_test.json", "json_web_key_test.json"])
        let files = (try? FileManager.default.contentsOfDirectory(atPath: shared.path))?.filter { $0.hasSuffix(".json") } ?? []
        for file in files {
            #expect(
                try Data(contentsOf: shared.appendingPathComponent(file)) == Data(contentsOf: bundled.appendingPathComponent(file)),
                "\(file) differs from ../shared/vectors/wycheproof")
        }
    }
}
