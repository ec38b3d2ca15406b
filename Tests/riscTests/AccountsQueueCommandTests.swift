import Foundation
import RISCCore
import RISCTestKit
import Testing

@Suite("risc accounts and risc queue (the built binary)")
struct AccountsQueueCommandTests {
    @Test("keys token-key writes a key once; the account commands use it with --token-key-file and refuse without it")
    func tokenKeyFile() throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("risc-cli-key-\(UUID().uuidString)").path
        let key = data + "-token-key"
        let made = try RiscBinary.run(["keys", "token-key", "--out", key])
        #expect(made.status == 0 && FileManager.default.contents(atPath: key)?.count == 32)
        #expect(try RiscBinary.run(["keys", "token-key", "--out", key]).status == 64)  // never overwritten
        let link = try RiscBinary.run(["accounts", "link", "--subject", "7", "--user", "u7", "--data-dir", data, "--token-key-file", key])
        #expect(link.status == 0, "\(link.stderr)")
        let without = try RiscBinary.run(["accounts", "list", "--data-dir", data])
        #expect(without.status != 0 && without.stderr.contains("is missing"), "\(without.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data + "/token-key"))
        #expect(try RiscBinary.run(["accounts", "list", "--data-dir", data, "--token-key-file", key]).status == 0)
    }

    @Test("link, import, list, show; queue status, list, show, retry and purge on an empty queue")
    func accountsAndQueue() throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("risc-cli-acc-\(UUID().uuidString)").path
        let tokenFile = data + "-token"
        try Data("1//0gexample-refresh-token-for-tests\n".utf8).write(to: URL(fileURLWithPath: tokenFile))
        let link = try RiscBinary.run([
            "accounts", "link", "--subject", "1001", "--user", "u1", "--email", "A@Example.com", "--session", "s1",
            "--refresh-token-file", tokenFile, "--data-dir", data,
        ])
        #expect(link.status == 0, "\(link.stderr)")
        #expect(!link.stdout.contains("1//0gexample"))
        let imported = try RiscBinary.run(
            ["accounts", "import", "-", "--data-dir", data],
            stdin: #"{"subject":"1002","user_id":"u2","sessions":["x","y"]}"# + "\n" + #"{"subject":"1003","user_id":"u3"}"# + "\n")
        #expect(imported.stdout.contains("imported 2"))
        let bad = try RiscBinary.run(["accounts", "import", "-", "--data-dir", data], stdin: #"{"subject":1}"# + "\n")
        #expect(bad.status != 0 && bad.stderr.contains("line 1"))
        let list = try RiscBinary.run(["accounts", "list", "--json", "--data-dir", data])
        let accounts = try JSONParser.parse(list.stdout).arrayValue ?? []
        #expect(accounts.count == 3)
        let show = try RiscBinary.run(["accounts", "show", "1001", "--json", "--data-dir", data])
        let account = try JSONParser.parseObject(Array(show.stdout.utf8))
        #expect(account["email"] == "a@example.com")
        // Counted by kind (issue 15): one Google refresh token, no linked-account token.
        #expect(account["tokens"] == ["google_refresh": ["active": 1, "revoked": 0], "linked": ["active": 0, "revoked": 0]])
        #expect(try RiscBinary.run(["accounts", "show", "nobody", "--data-dir", data]).status == 1)
        // Unlink (issue 15): gone with its sessions; a second time, exit 1.
        let unlink = try RiscBinary.run(["accounts", "unlink", "1002", "--data-dir", data])
        #expect(unlink.status == 0 && unlink.stdout.contains("unlinked 1002"), "\(unlink.stdout) \(unlink.stderr)")
        #expect(try RiscBinary.run(["accounts", "show", "1002", "--data-dir", data]).status == 1)
        #expect(try RiscBinary.run(["accounts", "unlink", "1002", "--data-dir", data]).status == 1)
        let database = try String(decoding: Data(contentsOf: URL(fileURLWithPath: data + "/risc.sqlite3")), as: UTF8.self)
        #expect(!database.contains("1//0gexample-refresh"))

        let status = try JSONParser.parseObject(Array(try RiscBinary.run(["queue", "status", "--data-dir", data]).stdout.utf8))
        #expect(status["pending"] == 0 && status["dead"] == 0)
        #expect(try RiscBinary.run(["queue", "retry", "--dead", "--data-dir", data]).stdout.contains("requeued 0"))
        #expect(try RiscBinary.run(["queue", "purge", "--dead", "--older-than", "30d", "--data-dir", data]).stdout.contains("purged 0"))
        #expect(try RiscBinary.run(["queue", "show", "nope", "--data-dir", data]).status == 1)
        #expect(try RiscBinary.run(["queue", "retry", "--data-dir", data]).status == 64)
        #expect(try RiscBinary.run(["queue", "status", "--data-dir", data + "-missing"]).status != 0)
    }
}
