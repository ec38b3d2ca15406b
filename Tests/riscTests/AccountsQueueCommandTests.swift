import Foundation
import RISCCore
import RISCTestKit
import Testing

@Suite("risc accounts and risc queue (the built binary)")
struct AccountsQueueCommandTests {
    @Test("keys token-key writes a key once; the account commands use it with --token-key-file and refuse without it")
    func tokenKeyFile() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-key-\(UUID().uuidString)").path
        let key = data + "-token-key"
        let made = try await RiscBinary.run(["keys", "token-key", "--out", key])
        #expect(made.status == 0 && FileManager.default.contents(atPath: key)?.count == 32)
        #expect(try await RiscBinary.run(["keys", "token-key", "--out", key]).status == 64)  // never overwritten
        let link = try await RiscBinary.run(["accounts", "link", "--subject", "7", "--user", "u7", "--data-dir", data, "--token-key-file", key, "--create"])
        #expect(link.status == 0, "\(link.stderr)")
        let without = try await RiscBinary.run(["accounts", "list", "--data-dir", data])
        #expect(without.status != 0 && without.stderr.contains("is missing"), "\(without.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data + "/token-key"))
        #expect(try await RiscBinary.run(["accounts", "list", "--data-dir", data, "--token-key-file", key]).status == 0)
    }

    @Test("link, import, list, show; queue status, list, show, retry and purge on an empty queue")
    func accountsAndQueue() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-acc-\(UUID().uuidString)").path
        let tokenFile = data + "-token"
        try Data("1//0gexample-refresh-token-for-tests\n".utf8).write(to: URL(fileURLWithPath: tokenFile))
        let link = try await RiscBinary.run([
            "accounts", "link", "--subject", "1001", "--user", "u1", "--email", "A@Example.com", "--session", "s1",
            "--refresh-token-file", tokenFile, "--data-dir", data, "--create",
        ])
        #expect(link.status == 0, "\(link.stderr)")
        #expect(!link.stdout.contains("1//0gexample"))
        let imported = try await RiscBinary.run(
            ["accounts", "import", "-", "--data-dir", data],
            stdin: #"{"subject":"1002","user_id":"u2","sessions":["x","y"]}"# + "\n" + #"{"subject":"1003","user_id":"u3"}"# + "\n")
        #expect(imported.stdout.contains("imported 2 accounts"))
        let one = try await RiscBinary.run(["accounts", "import", "-", "--data-dir", data], stdin: #"{"subject":"1004","user_id":"u4"}"# + "\n")
        #expect(one.stdout == "imported 1 account\n", "\(one.stdout)")
        let bad = try await RiscBinary.run(["accounts", "import", "-", "--data-dir", data], stdin: #"{"subject":1}"# + "\n")
        #expect(bad.status != 0 && bad.stderr.contains("line 1"))
        let list = try await RiscBinary.run(["accounts", "list", "--json", "--data-dir", data])
        let accounts = try JSONParser.parse(list.stdout).arrayValue ?? []
        #expect(accounts.count == 4)
        let show = try await RiscBinary.run(["accounts", "show", "1001", "--json", "--data-dir", data])
        let account = try JSONParser.parseObject(Array(show.stdout.utf8))
        #expect(account["email"] == "a@example.com")
        // Counted by kind (issue 15): one Google refresh token, no linked-account token.
        #expect(account["tokens"] == ["google_refresh": ["active": 1, "revoked": 0], "linked": ["active": 0, "revoked": 0]])
        #expect(try await RiscBinary.run(["accounts", "show", "nobody", "--data-dir", data]).status == 1)
        // Unlink (issue 15): gone with its sessions; a second time, exit 1.
        let unlink = try await RiscBinary.run(["accounts", "unlink", "1002", "--data-dir", data])
        #expect(unlink.status == 0 && unlink.stdout.contains("unlinked 1002"), "\(unlink.stdout) \(unlink.stderr)")
        #expect(try await RiscBinary.run(["accounts", "show", "1002", "--data-dir", data]).status == 1)
        #expect(try await RiscBinary.run(["accounts", "unlink", "1002", "--data-dir", data]).status == 1)
        let database = try String(decoding: Data(contentsOf: URL(fileURLWithPath: data + "/risc.sqlite3")), as: UTF8.self)
        #expect(!database.contains("1//0gexample-refresh"))

        let status = try JSONParser.parseObject(Array(try await RiscBinary.run(["queue", "status", "--data-dir", data]).stdout.utf8))
        #expect(status["pending"] == 0 && status["dead"] == 0)
        #expect(try await RiscBinary.run(["queue", "retry", "--dead", "--data-dir", data]).stdout.contains("requeued 0"))
        #expect(try await RiscBinary.run(["queue", "purge", "--dead", "--older-than", "30d", "--data-dir", data]).stdout.contains("purged 0"))
        #expect(try await RiscBinary.run(["queue", "show", "nope", "--data-dir", data]).status == 1)
        #expect(try await RiscBinary.run(["queue", "retry", "--data-dir", data]).status == 64)
        #expect(try await RiscBinary.run(["queue", "status", "--data-dir", data + "-missing"]).status != 0)
    }

    /// Found: `risc accounts list` read every account into memory before printing one, and `--json`
    /// built the whole array as one value first: over 1.2 million accounts they peaked at 486 MB
    /// and 2.9 GB (12.7 s), on the machine the receiver runs on. Both now print a page of accounts
    /// at a time, the same output.
    @Test("accounts list and list --json print a page at a time: 40,000 accounts with the memory of one")
    func listInBoundedMemory() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-many-\(UUID().uuidString)")
        let few = Scratch.root.appendingPathComponent("risc-cli-one-\(UUID().uuidString)")
        let count = 40_000
        let lines = (0..<count).map { #"{"subject":"sub-\#($0)","user_id":"user-\#($0)","email":"u\#($0)@example.com"}"# }
        for (directory, text) in [(data, lines.joined(separator: "\n")), (few, lines[0])] {
            let imported = try await RiscBinary.run(["accounts", "import", "-", "--data-dir", directory.path, "--create"], stdin: text + "\n")
            try #require(imported.status == 0, "\(imported.stderr)")
        }
        for json in [true, false] {
            let options = ["accounts", "list"] + (json ? ["--json"] : [])
            let baseline = try await RiscBinary.peakMemory(options + ["--data-dir", few.path], output: few.appendingPathComponent("out"))
            let output = data.appendingPathComponent("out")
            let used = try await RiscBinary.peakMemory(options + ["--data-dir", data.path], output: output)
            let text = try String(contentsOf: output, encoding: .utf8)
            if json {
                let listed = try JSONParser.parse(text).arrayValue ?? []
                #expect(listed.count == count && listed.first?.objectValue?["subject"] == "sub-0" && listed.last?.objectValue?["subject"]?.stringValue == "sub-\(count - 1)")
                #expect(text.hasPrefix("[\n  {\n    \"") && text.hasSuffix("\n  }\n]\n"), "\(text.prefix(40)) … \(text.suffix(40))")
            } else {
                let rows = text.split(separator: "\n")
                #expect(rows.count == count + 1 && rows[1].hasPrefix("sub-0 ") && rows.last?.hasPrefix("sub-\(count - 1) ") == true)
            }
            #expect(used - baseline < 10 << 10, "accounts list\(json ? " --json" : ""): peak \(used) KiB against \(baseline) KiB for one account")
        }
    }

    /// Found: `risc accounts import` read the whole file and held every account before writing
    /// one: a million accounts (158 MB) peaked at 757 MB, and a file past 256 MiB (1.6 million
    /// accounts) was refused outright ("larger than 256 MiB"); the one transaction held the store
    /// for a minute, the receiver's indexing and the admin API waiting behind it. A file is now read
    /// a chunk at a time, twice (checked whole first, as before), and written in transactions of
    /// 20,000 accounts.
    @Test("accounts import reads a file a chunk at a time: 100,000 accounts with the memory of a transaction's; a bad line still imports none")
    func importInBoundedMemory() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-import-\(UUID().uuidString)")
        let few = Scratch.root.appendingPathComponent("risc-cli-import-one-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: few, withIntermediateDirectories: true)
        let count = 100_000
        func line(_ n: Int) -> String {
            #"{"subject":"sub-\#(n)","user_id":"user-\#(n)","email":"u\#(n)@example.com","sessions":["s-\#(n)"],"linked_tokens":["lt-\#(n)-0123456789abcdef"]}"#
        }
        let file = data.appendingPathComponent("accounts.jsonl"), one = few.appendingPathComponent("accounts.jsonl")
        try Data(("\u{FEFF}" + (0..<count).map(line).joined(separator: "\n")).utf8).write(to: file)  // a BOM, no newline at the end
        try Data((line(0) + "\n").utf8).write(to: one)
        let baseline = try await RiscBinary.peakMemory(
            ["accounts", "import", one.path, "--data-dir", few.path, "--create"], output: few.appendingPathComponent("out"))
        let used = try await RiscBinary.peakMemory(["accounts", "import", file.path, "--data-dir", data.path, "--create"], output: data.appendingPathComponent("out"))
        #expect(try String(contentsOf: data.appendingPathComponent("out"), encoding: .utf8) == "imported \(count) accounts\n")
        #expect(used - baseline < 28 << 10, "accounts import: peak \(used) KiB against \(baseline) KiB for one account")
        let last = try await RiscBinary.run(["accounts", "show", "sub-\(count - 1)", "--json", "--data-dir", data.path])
        let account = try JSONParser.parseObject(Array(last.stdout.utf8))
        #expect(account["user_id"] == .string("user-\(count - 1)") && account["tokens"]?.objectValue?["linked"] == ["active": 1, "revoked": 0], "\(last.stdout)")
        // Bad lines anywhere (the last, a duplicate far from its first): nothing more imported, each named.
        try Data(((0..<count).map { line($0 + count) } + [line(count + 5), #"{"subject":"x"}"#]).joined(separator: "\n").utf8).write(to: file)
        let refused = try await RiscBinary.run(["accounts", "import", file.path, "--data-dir", data.path])
        let again = "line \(count + 1): subject sub-\(count + 5) again (first on line 6)"
        #expect(refused.status == 64 && refused.stderr.contains(again) && refused.stderr.contains("line \(count + 2): "), "\(refused.stderr)")
        #expect(try await RiscBinary.run(["accounts", "show", "sub-\(count)", "--data-dir", data.path]).status == 1)
        let directory = try await RiscBinary.run(["accounts", "import", data.path, "--data-dir", data.path])
        #expect(directory.status == 64 && directory.stderr.contains("cannot read \(data.path): Is a directory"), "\(directory.stderr)")
        // Found next: standard input past 256 MiB (it is held: it cannot be read twice) was refused
        // as "cannot read -: larger than 256 MiB", naming no way on. It now says to give a file.
        let piped = try await RiscBinary.run(
            ["-c", "head -c 300000000 /dev/zero | tr '\\0' ' ' | \(RiscBinary.url.path) accounts import - --data-dir \(data.path)"],
            executable: URL(fileURLWithPath: "/bin/sh"))
        #expect(piped.status == 64, "\(piped.stderr)")
        #expect(piped.stderr.contains("standard input holds more than 256 MiB: write it to a file and import the file"), "\(piped.stderr)")
        // Found with that: a pipe named as a file (`/dev/stdin`, `<(zcat accounts.gz)`) was read
        // twice like a file, its second reading empty: "changed while it was imported: 0 accounts
        // written of the 2 checked". A pipe or a device is held as standard input is.
        let named = try await RiscBinary.run(["accounts", "import", "/dev/stdin", "--data-dir", data.path], stdin: line(7) + "\n" + line(8) + "\n")
        #expect(named.status == 0 && named.stdout == "imported 2 accounts\n", "\(named.stdout) \(named.stderr)")
        let substituted = try await RiscBinary.run(
            ["-c", "\(RiscBinary.url.path) accounts import <(printf '%s\\n' '\(line(9))') --data-dir \(data.path)"], executable: URL(fileURLWithPath: "/bin/bash"))
        #expect(substituted.status == 0 && substituted.stdout == "imported 1 account\n", "\(substituted.stdout) \(substituted.stderr)")
    }

    /// Found: `risc accounts link` for a subject linked to another user moved it to the new user
    /// and said only `linked 42 → u43`, as for a new link (a mistyped `--user` went unnoticed); and
    /// it counted "1 sessions".
    @Test("accounts link says when it moves a Google account to another user, and counts in the singular")
    func relinkSaysWhatItWas() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-relink-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        let first = try await RiscBinary.run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42", "--session", "s1"])
        #expect(first.status == 0 && first.stdout.contains("linked 42 → u42 (1 session, 0 tokens;") && !first.stdout.contains("was"), "\(first.stdout)")
        let again = try await RiscBinary.run(["accounts", "link", "--data-dir", data, "--subject", "42", "--user", "u42"])
        #expect(again.status == 0 && !again.stdout.contains("was"), "\(again.stdout)")
        let moved = try await RiscBinary.run(["accounts", "link", "--data-dir", data, "--subject", "42", "--user", "u43"])
        #expect(moved.status == 0 && moved.stdout.contains("linked 42 → u43 (was u42;"), "\(moved.stdout)")
        // The move is in the event log (a Google account that changes hands is worth an audit
        // line); links that move nothing are not.
        let lines = try String(contentsOfFile: data + "/events.log", encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONParser.parseObject(Array($0.utf8)) }.filter { $0["step"] == "site" }
        #expect(lines.count == 1, "\(lines)")
        #expect(
            lines.first?["outcome"] == "relinked" && lines.first?["source"] == "cli" && lines.first?["user_id"] == "u43"
                && lines.first?["previous_user_id"] == "u42" && lines.first?["subject"] == "42", "\(lines)")
        let tail = try await RiscBinary.run(["tail", "--data-dir", data, "--outcome", "relinked"])
        #expect(tail.stdout.contains("user_id=u43 previous_user_id=u42"), "\(tail.stdout)")
    }

    /// Found: `risc queue retry JTI` with a mistyped jti, or the jti of a SET that is done, printed
    /// `requeued 0` and exited 0: the operator was told it worked. Now each says why nothing was
    /// requeued (no such SET; a done SET is re-driven with replay), exit 1.
    @Test("queue retry JTI of no SET, or of a done one, says why nothing was requeued, exit 1")
    func retryNothing() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-retry-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        let linked = try await RiscBinary.run(["accounts", "link", "--create", "--data-dir", data, "--subject", "42", "--user", "u42"])
        try #require(linked.status == 0, "\(linked.stderr)")
        let replayed = try await RiscBinary.run(
            ["replay", "-", "--local", "--data-dir", data], stdin: #"{"type":"sessions-revoked","subject":"42","jti":"done-1"}"# + "\n")
        try #require(replayed.status == 0, "\(replayed.stdout) \(replayed.stderr)")
        let unknown = try await RiscBinary.run(["queue", "retry", "nope", "--data-dir", data])
        #expect(unknown.status == 1 && unknown.stderr.contains("no SET with jti nope"), "\(unknown.status) \(unknown.stdout) \(unknown.stderr)")
        let done = try await RiscBinary.run(["queue", "retry", "done-1", "--data-dir", data])
        #expect(
            done.status == 1 && done.stderr.contains("done-1 is done") && done.stderr.contains("risc replay --from-store --local --jti done-1"),
            "\(done.status) \(done.stdout) \(done.stderr)")
    }

    /// Found: a refresh-token file saved by an editor that starts files with a UTF-8 byte-order
    /// mark (Windows' Notepad) was fingerprinted with the mark: Google's `token-revoked` for that
    /// token then matched nothing ("unknown subject: no-op") and the token stayed active. The mark
    /// is not part of any file's text a command reads (tokens, token lists, key sets).
    @Test("a file starting with a UTF-8 byte-order mark is read without it: its token is revoked by Google's token-revoked")
    func byteOrderMark() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-bom-\(UUID().uuidString)").path
        let plain = data + "-rt", marked = data + "-rt-bom"
        defer { for path in [data, plain, marked] { try? FileManager.default.removeItem(atPath: path) } }
        try Data("1//0gplain-refresh-token\n".utf8).write(to: URL(fileURLWithPath: plain))
        try Data([0xEF, 0xBB, 0xBF] + Array("1//0gplain-refresh-token\r\n".utf8)).write(to: URL(fileURLWithPath: marked))
        let linked = try await RiscBinary.run(["accounts", "link", "--create", "--data-dir", data, "--subject", "77", "--user", "u77", "--refresh-token-file", marked])
        try #require(linked.status == 0, "\(linked.stderr)")
        let replayed = try await RiscBinary.run(
            ["replay", "-", "--local", "--data-dir", data], stdin: #"{"type":"token-revoked","subject":"77","token_file":"\#(plain)"}"# + "\n")
        #expect(replayed.stdout.contains(#""result":"revoked the matching token""#), "\(replayed.stdout) \(replayed.stderr)")
        let shown = try JSONParser.parseObject(Array(try await RiscBinary.run(["accounts", "show", "77", "--json", "--data-dir", data]).stdout.utf8))
        #expect(shown["tokens"]?.objectValue?["google_refresh"] == ["active": 0, "revoked": 1], "\(shown)")
        // The same for a token given to risc verify.
        let token = try await RiscBinary.run(["sign"])
        try Data([0xEF, 0xBB, 0xBF] + Array(token.stdout.utf8)).write(to: URL(fileURLWithPath: marked))
        let verified = try await RiscBinary.run(["verify", marked, "--jwks-file", "keys/test/jwks.json", "--audience", SETFactory.defaultAudience])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        // And the receiver's own jwks_file (a clear refusal before: "JWKS is not a JSON object").
        try Data([0xEF, 0xBB, 0xBF] + Array(try Data(contentsOf: URL(fileURLWithPath: "keys/test/jwks.json")))).write(to: URL(fileURLWithPath: marked))
        let checked = try await RiscBinary.run(["serve", "--audience", "a", "--jwks-file", marked, "--data-dir", data, "--check-config"])
        #expect(checked.status == 0, "\(checked.stdout) \(checked.stderr)")
    }

    /// Found: the admin API writes a `step: site` line when the site unlinks an account or revokes
    /// its linked tokens (and queues notices to Google), but the same changes made with `risc
    /// accounts unlink` and `risc linking revoke` left nothing in the event log: `risc tail` could
    /// not show who unlinked what.
    @Test("accounts unlink and linking revoke write the event-log line the admin API writes for the same change (source cli)")
    func siteLinesFromTheCommandLine() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-site-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        let tokenFile = data + "-linked-token"
        try Data("linked-token-0123456789\n".utf8).write(to: URL(fileURLWithPath: tokenFile))
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        for subject in ["42", "43"] {
            let linked = try await RiscBinary.run(
                ["accounts", "link", "--create", "--data-dir", data, "--subject", subject, "--user", "u" + subject, "--linked-token-file", tokenFile])
            try #require(linked.status == 0, "\(linked.stderr)")
        }
        let revoked = try await RiscBinary.run(["linking", "revoke", "43", "--data-dir", data])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let unlinked = try await RiscBinary.run(["accounts", "unlink", "42", "--data-dir", data])
        #expect(unlinked.status == 0, "\(unlinked.stderr)")
        let tail = try await RiscBinary.run(["tail", "--json", "-n", "0", "--data-dir", data])
        let lines = tail.stdout.split(separator: "\n").compactMap { try? JSONParser.parseObject(Array($0.utf8)) }
        let site = lines.filter { $0["step"] == "site" }
        #expect(site.count == 2, "\(tail.stdout) \(tail.stderr)")
        #expect(site.contains { $0["outcome"] == "linked_tokens_revoked" && $0["subject"] == "43" && $0["source"] == "cli" }, "\(site)")
        #expect(site.contains { $0["outcome"] == "unlinked" && $0["subject"] == "42" && $0["source"] == "cli" }, "\(site)")
        let filtered = try await RiscBinary.run(["tail", "--outcome", "unlinked", "-n", "0", "--data-dir", data])
        #expect(filtered.status == 0 && filtered.stdout.contains("42"), "\(filtered.stdout) \(filtered.stderr)")
    }

    @Test("issue 24 #8: accounts list, show, link and unlink escape subjects and user ids as risc tail does (ESC, OSC, BEL, U+202E never reach the terminal)")
    func humanOutputEscapes() async throws {
        let data = Scratch.root.appendingPathComponent("risc-cli-escape-\(UUID().uuidString)").path
        let hostile = "1\u{1B}[2J\u{1B}]0;owned\u{07}\u{202E}gpj.exe"
        let line = JSONValue.object(["subject": .string(hostile), "user_id": .string("u\u{1B}[31mred\u{9B}")]).serialized
        let imported = try await RiscBinary.run(["accounts", "import", "-", "--data-dir", data, "--create"], stdin: line + "\n")
        #expect(imported.status == 0, "\(imported.stderr)")
        let unsafe: [Unicode.Scalar] = ["\u{1B}", "\u{07}", "\u{202E}", "\u{9B}"]
        let runs = [
            try await RiscBinary.run(["accounts", "list", "--data-dir", data]),
            try await RiscBinary.run(["accounts", "link", "--subject", hostile, "--user", "u\u{1B}[31mred", "--data-dir", data]),
            try await RiscBinary.run(["accounts", "show", hostile + "x", "--data-dir", data]),
            try await RiscBinary.run(["accounts", "unlink", hostile, "--data-dir", data]),
        ]
        for run in runs {
            let printed = run.stdout + run.stderr
            #expect(!printed.unicodeScalars.contains { unsafe.contains($0) }, "raw control characters printed: \(printed.debugDescription)")
        }
        #expect(runs[0].stdout.contains("1\\x1b[2J\\x1b]0;owned\\x07\\u{202e}gpj.exe"), "\(runs[0].stdout.debugDescription)")
        #expect(runs[3].status == 0 && runs[3].stdout.contains("unlinked 1\\x1b"), "\(runs[3].stdout) \(runs[3].stderr)")
    }

    /// Issue 16: run in the wrong directory, `accounts list` made a new empty store and `queue
    /// status` reported an empty queue while the real one held a dead letter.
    /// Found: `risc store copy --from` a directory that does not exist made it, and left a
    /// `risc.lock` in it, before saying there was no store there.
    @Test("store copy from a directory without a store says so and makes nothing there")
    func copyFromNowhere() async throws {
        let missing = Scratch.root.appendingPathComponent("risc-cli-nowhere-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: missing) }
        let result = try await RiscBinary.run(["store", "copy", "--from", missing, "--to", "postgres://risc@127.0.0.1:9/risc"])
        #expect(result.status != 0 && result.stderr.contains("no store at \(missing)/risc.sqlite3"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing), "made \((try? FileManager.default.contentsOfDirectory(atPath: missing)) ?? [])")
    }

    /// Each command exits 64 with its message on standard error.
    static func expectUsageErrors(_ cases: [(command: [String], message: String)]) async throws {
        for (command, message) in cases {
            let result = try await RiscBinary.run(command)
            #expect(result.status == 64 && result.stderr.contains(message), "\(command): \(result.status) \(result.stderr.prefix(600))")
        }
    }
}
