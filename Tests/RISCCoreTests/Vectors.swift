import Foundation
import RISCCore

/// Loads the JSON test vectors copied into this test bundle.
enum Vectors {
    static func url(_ name: String) -> URL {
        Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Vectors")!
    }

    static func load(_ name: String) throws -> JSONObject {
        try JSONParser.parseObject(Array(try Data(contentsOf: url(name))))
    }

    static var names: [String] {
        let directory = Bundle.module.resourceURL!.appendingPathComponent("Vectors")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }
}

extension JSONObject {
    func string(_ path: String...) -> String? {
        var value: JSONValue? = .object(self)
        for key in path { value = value?.objectValue?[key] }
        return value?.stringValue
    }
    func object(_ path: String...) -> JSONObject? {
        var value: JSONValue? = .object(self)
        for key in path { value = value?.objectValue?[key] }
        return value?.objectValue
    }
}
