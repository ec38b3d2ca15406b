import Foundation
import RISCCore
import RISCLocal
import RISCTestKit
import Testing

@testable import RISCSQLite

/// The token-fingerprint key and the store's check value of it (issue 14).
@Suite("Token key")
struct TokenKeyTests {
    static func directory() -> String {
        Scratch.root.appendingPathComponent("risc-token-key-\(UUID().uuidString)").path
    }

    @Test("a store made with a key refuses to open without it (a restore that lost token-key) or with another one")
    func restoreWithoutKey() throws {
        let directory = Self.directory()
        let first = try AccountStore(directory: directory)
        let keyPath = directory + "/token-key"
        #expect(FileManager.default.contents(atPath: keyPath).map(Array.init) == first.tokenKey)
        #expect(try AccountStore(directory: directory).tokenKey == first.tokenKey)  // reopens with the same key
        try FileManager.default.removeItem(atPath: keyPath)
        let missing = #expect(throws: StoreError.self) { try AccountStore(directory: directory) }
        #expect(missing?.code == .refused)
        #expect(missing?.description.contains("is missing") == true)
        #expect(!FileManager.default.fileExists(atPath: keyPath), "a new key was made silently")
        _ = try TokenKey.create(at: keyPath)
        let other = #expect(throws: StoreError.self) { try AccountStore(directory: directory) }
        #expect(other?.code == .refused)
        #expect(other?.description.contains("is not the key") == true)
        try FileManager.default.removeItem(atPath: keyPath)
        _ = FileManager.default.createFile(atPath: keyPath, contents: Data(first.tokenKey))
        #expect(try AccountStore(directory: directory).tokenKey == first.tokenKey)
    }

    @Test("accounts.token_key_file: used as given, never made by the store; the same file serves two stores")
    func configuredFile() throws {
        let file = Scratch.root.appendingPathComponent("risc-key-\(UUID().uuidString)").path
        let absent = #expect(throws: StoreError.self) { try AccountStore(directory: Self.directory(), tokenKeyFile: file) }
        #expect(absent?.code == .refused)
        #expect(absent?.description.contains("risc keys token-key --out") == true)
        let key = try TokenKey.create(at: file)
        #expect(key.count == TokenKey.length)
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        #expect(throws: StoreError.self) { try TokenKey.create(at: file) }  // never overwritten
        let a = Self.directory(), b = Self.directory()
        #expect(try AccountStore(directory: a, tokenKeyFile: file).tokenKey == key)
        #expect(try AccountStore(directory: b, tokenKeyFile: file).tokenKey == key)
        #expect(!FileManager.default.fileExists(atPath: a + "/token-key"))
        #expect(TokenKey.checkValue(key) != TokenKey.checkValue(Array(key.reversed())))
    }
}
