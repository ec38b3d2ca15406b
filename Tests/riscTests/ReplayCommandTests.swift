import Foundation
import RISCCore
import RISCTestKit
import Testing

@Suite("risc replay (the built binary)", .serialized)
struct ReplayCommandTests {
    /// The value of a summary row (`label` then spaces then the value).
    func row(_ output: String, _ label: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(label + " ") }
            .map { $0.dropFirst(label.count).trimmingCharacters(in: .whitespaces) }
    }

    /// Found: `risc sign --iat nan` (or `inf`) printed a SET whose payload held `"iat":nan`, which
    /// is not JSON: a token no receiver could read, made by the tool meant to test them.
    @Test("risc sign refuses an --iat that is not a finite number (exit 64)")
    func signIssuedAt() async throws {
        for value in ["nan", "inf"] {
            let result = try await RiscBinary.run(["sign", "--iat", value])
            #expect(result.status == 64 && result.stderr.contains("--iat") && result.stdout.isEmpty, "\(value): \(result.status) \(result.stdout) \(result.stderr)")
        }
        #expect(try await RiscBinary.run(["sign", "--iat", "1700000000"]).status == 0)
    }

    @Test("replays files, signed descriptions and stored SETs; summary and exit status reflect the answers")
    func replay() async throws {
        let (process, data, port, _) = try await ServeCommandTests.startServe()
        defer { process.terminate() }
        let url = "http://127.0.0.1:\(port)/events"
        let sample = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let wrongAud = try await RiscBinary.run(["sign", "--negative", "wrong-aud"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let file = data.path + "-tokens"
        // A line starting with # is a comment, in either kind of file (one was sent as a SET).
        try Data(["# two samples and one for another audience", sample, wrongAud, "  # indented", sample].joined(separator: "\n").utf8).write(
            to: URL(fileURLWithPath: file))
        let mixed = try await RiscBinary.run(["replay", file, "--to", url, "--concurrency", "2"])
        #expect(mixed.status == 1)
        #expect(row(mixed.stdout, "sent") == "3")
        #expect(row(mixed.stdout, "202") == "2")
        #expect(row(mixed.stdout, "400 invalid_audience") == "1")
        // Found: an answer other than 202, 400 and 5xx (the wrong path, a 405 from the admin port)
        // was summed up as "400 http 404", as if the receiver had refused the SET.
        let wrongPath = try await RiscBinary.run(["replay", file, "--to", "http://127.0.0.1:\(port)/event"])
        #expect(wrongPath.status == 1 && row(wrongPath.stdout, "404 (not a receiver's path?)") == "3", "\(wrongPath.stdout)")
        #expect(!wrongPath.stdout.contains("400"), "\(wrongPath.stdout)")

        let descriptions = [
            "# a session, a bulk account, a verification",
            #"{"type":"sessions-revoked","subject":"42","jti":"replay-1"}"#,
            #"{"type":"account-disabled","reason":"bulk-account","subject":"43"}"#,
            #"{"type":"verification","state":"hello"}"#,
        ].joined(separator: "\n")
        let signed = try await RiscBinary.run(["replay", "-", "--to", url, "--rate", "50"], stdin: descriptions)
        #expect(signed.status == 0, "\(signed.stdout) \(signed.stderr)")
        #expect(row(signed.stdout, "202") == "3")

        let stored = try await RiscBinary.run(["replay", "--from-store", "--data-dir", data.path, "--jti", "replay-1", "--to", url])
        #expect(stored.status == 0 && row(stored.stdout, "sent") == "1")
        #expect(try await RiscBinary.run(["replay", "--from-store", "--data-dir", data.path, "--dead", "--to", url]).status != 0)

        let dry = try await RiscBinary.run(["replay", file, "--dry-run", "--jwks-file", "keys/test/jwks.json"])
        #expect(dry.status == 1)  // the wrong-aud token does not verify
        #expect(dry.stdout.contains(#""actions":["end_sessions","suspend_google_signin","revoke_linked_tokens"]"#))
        #expect(dry.stdout.contains("invalid_audience"))
        #expect(try await RiscBinary.run(["replay", file]).status == 64)

        // On a terminal (a pty from script(1)) a progress bar is drawn on standard error; piped, none.
        let onTerminal = try await RiscBinary.run(
            [
                "-c", "exec script -qec '\(RiscBinary.url.path) replay \(file) --to \(url)' /dev/null",
            ], executable: URL(fileURLWithPath: "/bin/sh"))
        #expect(onTerminal.stdout.contains("[##############################] 3/3"), "\(onTerminal.stdout)")
        #expect(!mixed.stderr.contains("3/3"))
    }
}

extension ReplayCommandTests {
    /// Found: `risc replay --from-store` read every chosen SET into memory before sending or
    /// planning one (125,000 SETs: 168 MB), and the store gave it at most 1,000,000 of them: a
    /// larger store was replayed in part, saying nothing of the rest. It now reads them a page of
    /// 1,000 at a time, all of them, in order.
    @Test("replay --from-store, planned or re-driven here, reads the stored SETs a page at a time: 20,000 of them, in order, with the memory of a few")
    func fromStoreInPages() async throws {
        func storeOf(_ count: Int) async throws -> URL {
            let data = Scratch.root.appendingPathComponent("risc-replay-pages-\(UUID().uuidString)")
            let made = try await RiscBinary.run(["accounts", "link", "--subject", "s", "--user", "u", "--data-dir", data.path, "--create"])
            try #require(made.status == 0, "\(made.stderr)")
            // Rows as a receiver stores them (decoded, not verified, by --dry-run without a key set).
            let script = """
                import base64, json, sqlite3, sys
                def part(value): return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
                db = sqlite3.connect(sys.argv[1])
                header = part({"alg": "RS256", "kid": "k"})
                event = "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"
                rows = []
                for n in range(int(sys.argv[2])):
                    claims = {"iss": "https://accounts.google.com/", "aud": "a", "iat": 1700000000, "jti": "page-%d" % n,
                              "events": {event: {"subject": {"subject_type": "iss-sub", "iss": "https://accounts.google.com/", "sub": str(n)}}},
                              "pad": "p" * 1200}
                    rows.append(("https://accounts.google.com/", "page-%d" % n, "https://accounts.google.com/", 1700000000, 1700000000 + n,
                                 1700000000 + n, json.dumps([event]), "[]", header + "." + part(claims) + ".c2ln", "done"))
                db.executemany("INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, event_types, subjects, token, state) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                db.commit()
                """
            let filled = try await RiscBinary.run(
                ["-c", script, data.appendingPathComponent("risc.sqlite3").path, "\(count)"], executable: URL(fileURLWithPath: "/usr/bin/python3"))
            try #require(filled.status == 0, "\(filled.stderr)")
            return data
        }
        let count = 20_000
        let (many, one) = (try await storeOf(count), try await storeOf(1))
        func peak(_ data: URL, _ options: [String]) async throws -> Int {
            try await RiscBinary.peakMemory(["replay", "--from-store", "--data-dir", data.path] + options, output: data.appendingPathComponent("out"))
        }
        func jtis(_ data: URL) throws -> [String] {
            let lines = try String(contentsOf: data.appendingPathComponent("out"), encoding: .utf8).split(separator: "\n")
            return lines.compactMap { try? JSONParser.parseObject(Array($0.utf8))["jti"]?.stringValue }
        }
        let (used, baseline) = (try await peak(many, ["--dry-run"]), try await peak(one, ["--dry-run"]))
        let planned = try jtis(many)
        #expect(planned == (0..<count).map { "page-\($0)" }, "\(planned.count) planned, first \(planned.first ?? "-")")
        #expect(used - baseline < 12 << 10, "replay --from-store --dry-run: peak \(used) KiB against \(baseline) KiB for one SET")

        // Found next: `--local --from-store` (re-drive them here) read every chosen row twice, to
        // log it requeued and to report it (50,000 SETs: 108 MB; 20,000 here 41 MB above one).
        // Now a page at a time too (what stays above one SET's run is SQLite's caches: 55 MB for
        // 20,000, 57 for 100,000).
        let (redriven, alone) = (try await peak(many, ["--local"]), try await peak(one, ["--local"]))
        let reported = try jtis(many)
        #expect(reported == (0..<count).map { "page-\($0)" }, "\(reported.count) reported, first \(reported.first ?? "-")")
        let summary = try String(contentsOf: many.appendingPathComponent("out"), encoding: .utf8)
        #expect(summary.contains("replayed                      \(count)\napplied                       \(count)\n"), "\(summary.suffix(300))")
        #expect(redriven - alone < 24 << 10, "replay --local --from-store: peak \(redriven) KiB against \(alone) KiB for one SET")
        let log = try String(contentsOf: many.appendingPathComponent("events.log"), encoding: .utf8)
        #expect(log.components(separatedBy: #""step":"replayed""#).count - 1 == count)
    }

    /// Found: `risc replay SOURCE` read the whole file (at most 256 MiB: about 200,000 SETs) and
    /// held every SET before sending or planning one (20,000 SETs: tens of MB); and a bad
    /// description was named by its place among the descriptions, not its line in the file (a
    /// comment or a blank line before it shifted the number). A file is now read a chunk at a
    /// time, twice: checked whole first (nothing is sent when a description is bad, naming its
    /// line), then a page of 1,000 at a time.
    @Test("replay SOURCE reads the file a chunk at a time: 20,000 SETs planned in order with the memory of a few; a bad description named by its line")
    func sourceInPages() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-replay-source-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func part(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }
        let header = part(#"{"alg":"RS256","kid":"k"}"#), event = "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"
        func token(_ n: Int) -> String {
            let subject = #"{"subject_type":"iss-sub","iss":"https://accounts.google.com/","sub":"\#(n)"}"#
            let pad = String(repeating: "p", count: 1200)
            let claims = #"{"iss":"https://accounts.google.com/","aud":"a","iat":1700000000,"jti":"line-\#(n)","events":{"\#(event)":{"subject":\#(subject)}},"pad":"\#(pad)"}"#
            return header + "." + part(claims) + ".c2ln"
        }
        let count = 20_000
        let many = directory.appendingPathComponent("many.txt"), one = directory.appendingPathComponent("one.txt")
        try Data(("# captured\n\n" + (0..<count).map(token).joined(separator: "\n") + "\n").utf8).write(to: many)
        try Data((token(0) + "\n").utf8).write(to: one)
        let output = directory.appendingPathComponent("out")
        let used = try await RiscBinary.peakMemory(["replay", many.path, "--dry-run"], output: output)
        let planned = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").compactMap {
            try? JSONParser.parseObject(Array($0.utf8))["jti"]?.stringValue
        }
        let baseline = try await RiscBinary.peakMemory(["replay", one.path, "--dry-run"], output: directory.appendingPathComponent("out-one"))
        #expect(planned == (0..<count).map { "line-\($0)" }, "\(planned.count) planned, first \(planned.first ?? "-")")
        #expect(used - baseline < 12 << 10, "replay SOURCE --dry-run: peak \(used) KiB against \(baseline) KiB for one SET")

        let descriptions = directory.appendingPathComponent("descriptions.txt")
        try Data(("# two events\n\n" + #"{"type":"sessions-revoked","subject":"41"}"# + "\n" + #"{"type":"sessions-revoked","subjct":"42"}"# + "\n").utf8)
            .write(to: descriptions)
        let bad = try await RiscBinary.run(["replay", descriptions.path, "--dry-run"])
        #expect(bad.status == 64 && bad.stderr.contains("\(descriptions.path):4: unknown member 'subjct'") && bad.stdout.isEmpty, "\(bad.stderr)")
    }

    /// Found: `risc replay --dry-run`, "show what they would do", planned every SET with the default
    /// action table, so a receiver whose `actions.table` differs was shown actions it would not
    /// take (and `--config` was refused with a SOURCE file); and SETs it signed itself from
    /// descriptions with `--keys` were only decoded, "verified": false, while `--local` verifies
    /// them against the JWKS of `--keys`. With `--config` the receiver's table plans them, and
    /// they are verified as `--local` verifies them.
    @Test("--dry-run plans with the receiver's action table (--config) and verifies what it signed against the JWKS of --keys")
    func dryRunUsesTheReceiversTable() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-dry-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("risc.json").path
        try Data(
            #"{"audiences": ["risc-test-client.apps.googleusercontent.com"], "data_dir": "\#(directory.path)/data", "actions": {"table": {"sessions-revoked": {"": ["flag_for_review"]}}}}"#
                .utf8
        ).write(to: URL(fileURLWithPath: config))
        let description = #"{"type":"sessions-revoked","subject":"42","jti":"dry-1"}"#
        let planned = try await RiscBinary.run(["replay", "-", "--dry-run", "--config", config], stdin: description)
        #expect(planned.status == 0, "\(planned.stdout) \(planned.stderr)")
        #expect(planned.stdout.contains(#""actions":["flag_for_review"]"#) && planned.stdout.contains(#""verified":true"#), "\(planned.stdout)")
        // Without --config: the default table, still verified against the keys that signed it.
        let plain = try await RiscBinary.run(["replay", "-", "--dry-run"], stdin: description)
        #expect(plain.stdout.contains(#""actions":["end_sessions"]"#) && plain.stdout.contains(#""verified":true"#), "\(plain.stdout)")
        #expect(!plain.stderr.contains("decoding without verifying"), "\(plain.stderr)")
    }

    /// Found: an event description's misspelt member was ignored, so `{"type": "sessions-revoked",
    /// "subjct": "42"}` was signed for the default test subject: with `--local` against a real
    /// store, an event applied to another account than the one meant. Descriptions are read as
    /// strictly as `accounts import` reads its lines.
    @Test("an event description with a member replay does not know is refused, naming it and the line (exit 64)")
    func strictDescriptions() async throws {
        let result = try await RiscBinary.run(["replay", "-", "--dry-run"], stdin: #"{"type":"sessions-revoked","subject":"41"}"# + "\n" + #"{"type":"sessions-revoked","subjct":"42"}"# + "\n")
        #expect(result.status == 64, "\(result.status) \(result.stdout)")
        #expect(result.stderr.contains("-:2: unknown member 'subjct' (known: iat, jti, reason, state, subject, token_alg, token_file, type)"), "\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        // `iat` is one (as `risc sign --iat`): it was ignored before, the SET signed with the time.
        let dated = try await RiscBinary.run(["replay", "-", "--dry-run"], stdin: #"{"type":"sessions-revoked","subject":"41","iat":2000}"#)
        #expect(dated.status == 0, "\(dated.stderr)")
        // A key directory that cannot sign them is a usage error naming --keys (it exited 1, as a refusal).
        let keyless = try await RiscBinary.run(["replay", "-", "--dry-run", "--keys", "/nonexistent"], stdin: #"{"type":"sessions-revoked"}"#)
        #expect(keyless.status == 64 && keyless.stderr.contains("--keys /nonexistent: no jwks.json in /nonexistent"), "\(keyless.status) \(keyless.stderr)")
        let bad = try await RiscBinary.run(["replay", "-", "--dry-run"], stdin: #"{"type":"sessions-revoked","iat":"yesterday"}"#)
        #expect(bad.status == 64 && bad.stderr.contains("'iat' must be seconds since 1970"), "\(bad.stderr)")
    }

    /// Found: a file's first line decides its kind, so a file of SETs with an event description
    /// after them (two files concatenated) sent the description's JSON to the receiver as a SET (a
    /// 400 counted, exit 1), and a file of descriptions with a SET after them stopped with the JSON
    /// parser's "unexpected character at byte 0". Both now stop before anything is sent, naming
    /// the line and what it is.
    @Test("a file mixing compact SETs and event descriptions is refused before anything is sent, naming the line (exit 64)")
    func oneKindAFile() async throws {
        let sample = try String(contentsOfFile: "keys/test/sample-account-disabled.jwt", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let port = try PostgresCluster.freePort()  // nothing listens there: a send would be a transport error, exit 1
        let setsThenDescription = try await RiscBinary.run(
            ["replay", "-", "--to", "http://127.0.0.1:\(port)/events"], stdin: sample + "\n# next\n" + #"{"type":"sessions-revoked"}"# + "\n")
        #expect(setsThenDescription.status == 64, "\(setsThenDescription.status) \(setsThenDescription.stdout)")
        #expect(setsThenDescription.stderr.contains("-:3: an event description in a file of compact SETs"), "\(setsThenDescription.stderr)")
        let descriptionThenSET = try await RiscBinary.run(
            ["replay", "-", "--to", "http://127.0.0.1:\(port)/events"], stdin: #"{"type":"sessions-revoked"}"# + "\n" + sample + "\n")
        #expect(descriptionThenSET.status == 64, "\(descriptionThenSET.status) \(descriptionThenSET.stdout)")
        #expect(descriptionThenSET.stderr.contains("-:2: a compact SET in a file of event descriptions"), "\(descriptionThenSET.stderr)")
    }

    /// Found: `--to notaurl` or `--to ftp://…` was taken, and every SET then counted as a
    /// "transport error" with nothing to say which: a mistyped URL or a receiver not listening
    /// looked the same, and neither was named.
    @Test("--to must be an http or https URL with a host (exit 64); a transport error is counted with what it was")
    func targetURL() async throws {
        let sample = "keys/test/sample-account-disabled.jwt"
        for bad in ["notaurl", "ftp://127.0.0.1/events", "http:///events", "127.0.0.1:8443/events"] {
            let result = try await RiscBinary.run(["replay", sample, "--to", bad])
            #expect(result.status == 64 && result.stderr.contains("--to must be an http:// or https:// URL"), "\(bad): \(result.stderr)")
        }
        let port = try PostgresCluster.freePort()  // nothing listens there
        let refused = try await RiscBinary.run(["replay", sample, "--to", "http://127.0.0.1:\(port)/events"])
        #expect(refused.status == 1)
        #expect(row(refused.stdout, "transport errors") == "1", "\(refused.stdout)")
        let reason = refused.stdout.split(separator: "\n").first { $0.hasPrefix("  first: ") }
        #expect(reason?.lowercased().contains("connect") == true, "\(refused.stdout)")
        // libcurl's own account: which address and port could not be reached.
        #expect(reason?.contains("127.0.0.1 port \(port)") == true, "\(refused.stdout)")
    }

    /// Found: a receiver whose certificate comes from a private CA (a staging receiver, or one with
    /// a self-signed certificate for a test) could not be replayed to: libcurl checked it against
    /// the system's CAs only, and neither SSL_CERT_FILE nor CURL_CA_BUNDLE reached it.
    @Test("--ca-file verifies an https receiver's certificate with the given PEM; without it a private CA's certificate is a named transport error; a missing file is exit 64")
    func caFile() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-replay-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)
        let serve = try await ServeCommandTests.startServe(extra: ["--tls-cert", certificate.certificatePath, "--tls-key", certificate.keyPath])
        defer { serve.process.terminate() }
        let sample = "keys/test/sample-account-disabled.jwt", url = "https://localhost:\(serve.port)/events"
        let untrusted = try await RiscBinary.run(["replay", sample, "--to", url])
        #expect(untrusted.status == 1 && row(untrusted.stdout, "transport errors") == "1" && untrusted.stdout.contains("certificate"), "\(untrusted.stdout)")
        let trusted = try await RiscBinary.run(["replay", sample, "--to", url, "--ca-file", certificate.certificatePath])
        #expect(trusted.status == 0 && row(trusted.stdout, "202") == "1", "\(trusted.stdout) \(trusted.stderr)")
        let missing = try await RiscBinary.run(["replay", sample, "--to", url, "--ca-file", directory.appendingPathComponent("none.pem").path])
        #expect(missing.status == 64 && missing.stderr.contains("--ca-file: cannot read"), "\(missing.stderr)")
        let alone = try await RiscBinary.run(["replay", sample, "--dry-run", "--ca-file", certificate.certificatePath])
        #expect(alone.status == 64 && alone.stderr.contains("--ca-file goes with --to"), "\(alone.stderr)")
    }

    @Test("--local stores signed SETs and applies them without HTTP; --from-store re-drives them; refusals fail")
    func local() async throws {
        let data = Scratch.root.appendingPathComponent("risc-local-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        #expect(try await RiscBinary.run(["accounts", "link", "--subject", "77", "--user", "u-77", "--session", "s-1", "--data-dir", data, "--create"]).status == 0)
        let descriptions = [
            #"{"type":"sessions-revoked","subject":"77","jti":"local-1"}"#,
            #"{"type":"account-disabled","reason":"hijacking","subject":"77","jti":"local-2"}"#,
        ].joined(separator: "\n")
        let first = try await RiscBinary.run(["replay", "-", "--local", "--data-dir", data], stdin: descriptions)
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        #expect(row(first.stdout, "applied") == "2")
        #expect(first.stdout.contains(#""result":"ended 1 session""#))
        #expect(first.stdout.contains(#""result":"google_signin_enabled = false""#))

        // The same SETs again through intake: duplicates, applied once.
        let again = try await RiscBinary.run(["replay", "-", "--local", "--data-dir", data], stdin: descriptions)
        #expect(again.status == 0 && row(again.stdout, "duplicate (not applied again)") == "2" && row(again.stdout, "replayed") == "0")

        // From the store: requeued, actions run again (nothing left to end), logged as replayed.
        let stored = try await RiscBinary.run(["replay", "--from-store", "--local", "--jti", "local-1", "--data-dir", data])
        #expect(stored.status == 0 && row(stored.stdout, "applied") == "1", "\(stored.stdout) \(stored.stderr)")
        #expect(stored.stdout.contains(#""jti":"local-1","state":"done","events":["sessions-revoked"]"#))
        #expect(stored.stdout.contains("ended 0 sessions"))
        let log = try String(contentsOfFile: data + "/events.log", encoding: .utf8)
        #expect(log.contains(#""step":"replayed","outcome":"requeued","jti":"local-1""#))

        let refused = try await RiscBinary.run(["replay", "-", "--local", "--data-dir", data], stdin: try await RiscBinary.run(["sign", "--negative", "wrong-iss"]).stdout)
        #expect(refused.status == 1 && row(refused.stdout, "refused") == "1")
        #expect(try await RiscBinary.run(["replay", "--from-store", "--local", "--jti", "nope", "--data-dir", data]).status == 64)
        // Time ranges: a time ago or an RFC 3339 time.
        let recent = try await RiscBinary.run(["replay", "--from-store", "--local", "--since", "1h", "--data-dir", data])
        #expect(recent.status == 0 && row(recent.stdout, "replayed") == "2", "\(recent.stdout) \(recent.stderr)")
        #expect(try await RiscBinary.run(["replay", "--from-store", "--local", "--until", "2000-01-01T00:00:00Z", "--data-dir", data]).status == 64)
        let window = try await RiscBinary.run([
            "replay", "--from-store", "--local", "--since", "2000-01-01T00:00:00Z", "--until", "0s", "--data-dir", data,
        ])
        #expect(row(window.stdout, "replayed") == "2")
        #expect(try await RiscBinary.run(["replay", "--from-store", "--local", "--since", "yesterday", "--data-dir", data]).status == 64)
        // Found: a day the calendar does not have (30 February, 31 April) was taken as the days after it.
        for day in ["2026-02-30T00:00:00Z", "2026-04-31T12:00:00.5Z", "2025-02-29T00:00:00+01:00"] {
            let refused = try await RiscBinary.run(["replay", "--from-store", "--local", "--until", day, "--data-dir", data])
            #expect(refused.status == 64 && refused.stderr.contains("--until"), "\(day): \(refused.status) \(refused.stderr)")
        }
        #expect(try await RiscBinary.run(["replay", "--from-store", "--dry-run", "--until", "2028-02-29T00:00:00Z", "--data-dir", data]).status != 64)
        // Found by fuzzing: a fraction of 33 digits killed risc (SIGFPE in ICU's date parser, exit 136).
        let long = try await RiscBinary.run([
            "replay", "--from-store", "--local", "--since", "2000-01-01T00:00:00.503222222222222222222222222222222938Z", "--data-dir", data,
        ])
        #expect(long.status == 0 && row(long.stdout, "replayed") == "2", "\(long.status) \(long.stdout) \(long.stderr)")
        // Found: a window that ends before it begins said "no SETs to replay", as an empty window does.
        let backwards = try await RiscBinary.run([
            "replay", "--from-store", "--dry-run", "--since", "2026-12-06T00:00:00Z", "--until", "2026-12-01T00:00:00Z", "--data-dir", data,
        ])
        #expect(backwards.status == 64 && backwards.stderr.contains("--since is after --until"), "\(backwards.stderr)")
        #expect(try await RiscBinary.run(["replay", "-", "--local", "--to", "http://127.0.0.1:1/events"]).status == 64)
    }
}
