import Foundation
import RISCCore
import RISCTestKit
import Testing

/// The config file in TOML or JSON, and `risc serve --print-config`.
@Suite("config files: TOML and JSON, --print-config (the built binary)")
struct ConfigFileCommandTests {
    /// Every setting `risc serve` takes, each with a value that is not its default.
    static let everySetting = #"""
        {
          "audiences": ["one.apps.googleusercontent.com", "two.apps.googleusercontent.com"],
          "issuer": "https://issuer.example",
          "issuer_aliases": ["https://issuer.example/"],
          "algorithms": ["RS256", "ES256"],
          "discovery_url": "https://issuer.example/.well-known/risc-configuration",
          "jwks_file": "/etc/risc/jwks.json",
          "data_dir": "/var/lib/risc-full",
          "accept_insecure_permissions": true,
          "listen": {"host": "127.0.0.2", "port": 9443},
          "events_path": "/risc/events",
          "trusted_proxies": ["10.0.0.0/8", "192.0.2.7"],
          "limits": {"invalid_per_minute": 120, "request_timeout": 15, "drain_timeout": 7, "max_connections": 2048, "max_connections_per_address": 8},
          "tls": {"certificate": "/etc/risc/cert.pem", "key": "/etc/risc/key.pem"},
          "admin": {"host": "127.0.0.3", "port": 9191, "token_file": "/etc/risc/admin-token", "max_connections": 16, "request_timeout": 12,
                    "max_connections_per_address": 3, "handshake_timeout": 2.5,
                    "tls": {"certificate": "/etc/risc/admin-cert.pem", "key": "/etc/risc/admin-key.pem", "client_ca": "/etc/risc/admin-ca.pem"},
                    "api": {"host": "127.0.0.4", "port": 9292}},
          "max_body_bytes": 32768,
          "retry_after": 45,
          "log": {"level": "info", "format": "json"},
          "event_log_stdout": true,
          "event_log_id": "receiver-b",
          "event_log_checkpoint_key": "/etc/risc/checkpoint.key",
          "event_log_checkpoint_interval": "1m",
          "event_log_checkpoint_url": "https://audit.example/checkpoints",
          "event_log_checkpoint_ca_file": "/etc/risc/audit-ca.pem",
          "event_log_rotate_bytes": 104857600,
          "event_log_rotate_interval": "12h",
          "event_log_retention": "90d",
          "event_log_chain": true,
          "clock_skew": 120.5,
          "jwks": {"min_ttl": 600, "max_ttl": 43200, "unknown_kid_cooldown": 30, "max_staleness": 7200, "failure_retry": 5},
          "store": {"url": "postgres://risc@db.example:5433/risc?sslmode=verify-full", "password_file": "/etc/risc/pg-password",
                    "ca_file": "/etc/risc/pg-ca.pem", "accept_unsafe_durability": true, "timeout": 7, "lease": 90},
          "accounts": {"token_key_file": "/etc/risc/token-key"},
          "retention": {"done": "36h", "duplicates": "14d"},
          "webhook": {"url": "https://hooks.example/revoke", "secret_file": "/etc/risc/webhook-secret", "ca_file": "/etc/risc/site-ca.pem", "timeout": 4, "scope": "rows"},
          "linking": {
            "google_client_id": "google-linking-client",
            "app_flip_hosts": ["flip.example"],
            "app_flip_bundle_ids": ["com.example.app"],
            "revocation_path": "/oauth/revoke",
            "client_secret_file": "/etc/risc/client-secret",
            "revocation_token_types": ["refresh_token"],
            "notices": {"issuer": "https://site.example", "key_dir": "/etc/risc/notice-keys", "service_account_file": "/etc/risc/sa.json",
                        "audience": "custom_audience", "token_type": "access_token", "endpoint": "https://publish.example/v1/events",
                        "body": "secevent+jwt", "json_field": "token", "timeout": 3}
          },
          "transmitters": {"okta": {"dialect": "ssf", "issuer": "https://example.okta.com", "issuer_aliases": ["https://example.okta.com/"],
                                    "audiences": ["https://risc.example/okta"], "algorithms": ["RS256"], "path": "/risc/okta",
                                    "authorization_file": "/etc/risc/okta-push", "discovery_url": "https://example.okta.com/.well-known/ssf-configuration",
                                    "actions": {"session-revoked": {"": ["end_sessions", "webhook"]}},
                                    "delivery": "poll", "poll_url": "https://example.okta.com/ssf/poll", "poll_interval": 10,
                                    "receiver_url": "https://risc.example/risc/okta", "events_requested": ["session-revoked", "credential-change"],
                                    "token_endpoint": "https://example.okta.com/oauth2/v1/token", "client_id": "risc-receiver",
                                    "client_auth": "private_key_jwt", "client_key_file": "/etc/risc/okta-client.pem", "ca_file": "/etc/risc/okta-ca.pem",
                                    "scope": "ssf.read ssf.manage"}},
          "actions": {"table": {"account-disabled": {"hijacking": ["end_sessions", "revoke_linked_tokens"]}},
                      "retry_window": "2d", "max_attempts": 50, "base_delay": 2, "max_delay": 600}
        }
        """#

    static func flatten(_ object: JSONObject, prefix: String = "", into result: inout [String: JSONValue]) {
        for (name, value) in object {
            let key = prefix.isEmpty ? name : "\(prefix).\(name)"
            if case .object(let nested) = value, key != "actions.table", key != "transmitters" { flatten(nested, prefix: key, into: &result) } else { result[key] = value }
        }
    }

    static func settings(_ json: String) throws -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        flatten(try JSONParser.parseObject(Array(json.utf8)), into: &result)
        return result
    }

    func temporaryDirectory(_ name: String) throws -> URL {
        let directory = Scratch.root.appendingPathComponent("risc-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("--print-config shows every setting as set; its TOML loads back to the same configuration, and so does its JSON; each value names its source")
    func printConfigRoundTrip() async throws {
        let directory = try temporaryDirectory("print")
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("full.json")
        try Data(Self.everySetting.utf8).write(to: input)

        // The test's config covers every key risc serve documents, so a new key cannot be missed here.
        let help = try await RiscBinary.run(["serve", "--help"])
        let keysText = help.stdout.components(separatedBy: .whitespacesAndNewlines).filter { !$0.isEmpty }.joined(separator: " ")
        let start = try #require(keysText.range(of: "Keys: ")), end = try #require(keysText.range(of: ". USAGE:"))
        let helpKeys = Set(keysText[start.upperBound..<end.lowerBound].components(separatedBy: ", "))
        let expected = try Self.settings(Self.everySetting)
        #expect(helpKeys == Set(expected.keys), "keys --help lists but the test does not set: \(helpKeys.subtracting(expected.keys)); set but not listed: \(Set(expected.keys).subtracting(helpKeys))")

        let toml = try await RiscBinary.run(["serve", "--config", input.path, "--print-config"])
        #expect(toml.status == 0, "\(toml.stderr)")
        let tomlFile = directory.appendingPathComponent("printed.toml")
        try Data(toml.stdout.utf8).write(to: tomlFile)
        // An object-valued setting's members (the action table's rows, a transmitter's settings) are
        // attributed once, in the comment above its tables.
        var inObject = false
        for line in toml.stdout.split(separator: "\n") {
            if line.hasPrefix("[") { inObject = line.hasPrefix("[transmitters.") || line.hasPrefix("[actions.table") }
            guard line.contains(" = "), !inObject, !line.hasPrefix("#") else { continue }
            #expect(line.hasSuffix("# file \(input.path)"), "every value here comes from the file: \(line)")
        }
        #expect(toml.stdout.contains("# transmitters: file \(input.path)\n[transmitters.okta]\n"))

        let direct = try await RiscBinary.run(["serve", "--config", input.path, "--print-config", "--print-config-format", "json"])
        let throughTOML = try await RiscBinary.run(["serve", "--config", tomlFile.path, "--print-config", "--print-config-format", "json"])
        #expect(direct.status == 0 && throughTOML.status == 0, "\(direct.stderr) \(throughTOML.stderr)")
        #expect(direct.stdout == throughTOML.stdout, "TOML printed and loaded back is the same configuration")
        let printedJSON = directory.appendingPathComponent("printed.json")
        try Data(direct.stdout.utf8).write(to: printedJSON)
        let throughJSON = try await RiscBinary.run(["serve", "--config", printedJSON.path, "--print-config", "--print-config-format", "json"])
        #expect(throughJSON.stdout == direct.stdout, "JSON printed and loaded back is the same configuration")

        let printed = try Self.settings(direct.stdout)
        #expect(Set(printed.keys) == helpKeys)
        for (key, value) in expected where key != "actions.table" {
            #expect(printed[key] == value, "\(key): printed \(printed[key]?.serialized ?? "nothing"), set \(value.serialized)")
        }
        // The table printed whole: the override and the defaults beside it.
        let table = try #require(printed["actions.table"]?.objectValue)
        #expect(table["account-disabled"]?.objectValue?["hijacking"] == .array([.string("end_sessions"), .string("revoke_linked_tokens")]))
        #expect(table["sessions-revoked"]?.objectValue?[""] == .array([.string("end_sessions")]))

        // Sources: a flag beats the environment, which beats the file; defaults say so.
        let layered = try await RiscBinary.run(
            ["serve", "--config", input.path, "--port", "7443", "--print-config"], environment: ["RISC_ADMIN_PORT": "7191"])
        #expect(layered.stdout.contains("port = 7443  # flag\n") && layered.stdout.contains("port = 7191  # environment RISC_ADMIN_PORT\n"), "\(layered.stdout)")
        let defaults = try await RiscBinary.run(["serve", "--audience", "a.apps.googleusercontent.com", "--print-config"])
        #expect(defaults.stdout.contains("data_dir = \"./data\"  # default\n") && defaults.stdout.contains("# webhook.url") == false)
        #expect(defaults.stdout.contains("[webhook]\n# url is not set\n"), "\(defaults.stdout)")
    }

    @Test("--print-config never shows a secret: files are named, not read, and a URL's password or query values read REDACTED")
    func printConfigRedacts() async throws {
        let directory = try temporaryDirectory("redact")
        defer { try? FileManager.default.removeItem(at: directory) }
        let secretFile = directory.appendingPathComponent("webhook-secret")
        try Data("webhook-secret-VALUE-0123456789".utf8).write(to: secretFile)
        let printed = try await RiscBinary.run([
            "serve", "--audience", "a.apps.googleusercontent.com", "--print-config",
            "--set", "webhook.url=https://hooks.example/revoke?token=hook-TOKEN-in-query&tenant=7",
            "--set", "webhook.secret_file=\(secretFile.path)",
            "--set", "discovery_url=https://issuer.example/risc?key=discovery-KEY",
        ])
        #expect(printed.status == 0, "\(printed.stderr)")
        for secret in ["webhook-secret-VALUE", "hook-TOKEN-in-query", "discovery-KEY"] {
            #expect(!printed.stdout.contains(secret), "\(secret) printed")
        }
        #expect(printed.stdout.contains(#"url = "https://hooks.example/revoke?token=REDACTED&tenant=REDACTED"  # flag"#), "\(printed.stdout)")
        #expect(printed.stdout.contains("secret_file = \"\(secretFile.path)\""))
    }

    @Test("issue 24 #7: --check-config and --print-config print no secret of a URL: query values, fragments, passwords and token-like path segments read REDACTED")
    func checkConfigRedacts() async throws {
        let directory = try temporaryDirectory("check-redact")
        defer { try? FileManager.default.removeItem(at: directory) }
        let secretFile = directory.appendingPathComponent("webhook-secret")
        try Data("webhook-secret-VALUE-0123456789".utf8).write(to: secretFile)
        let flags = [
            "serve", "--audience", "a.apps.googleusercontent.com", "--data-dir", directory.appendingPathComponent("data").path,
            "--set", "webhook.url=https://hooks.example/services/T0001/B0002/XyZ0pathSECRET0token1234#frag-SECRET",
            "--set", "webhook.secret_file=\(secretFile.path)",
            "--set", "discovery_url=https://issuer.example/.well-known/risc-configuration?key=discovery-KEY",
        ]
        for mode in ["--check-config", "--print-config"] {
            let run = try await RiscBinary.run(flags + [mode])
            #expect(run.status == 0, "\(mode): \(run.stderr)")
            for secret in ["XyZ0pathSECRET0token1234", "frag-SECRET", "discovery-KEY", "webhook-secret-VALUE"] {
                #expect(!run.stdout.contains(secret) && !run.stderr.contains(secret), "\(mode) printed \(secret)")
            }
            #expect(run.stdout.contains("https://hooks.example/services/T0001/B0002/REDACTED#REDACTED"), "\(mode): \(run.stdout)")
            #expect(run.stdout.contains("https://issuer.example/.well-known/risc-configuration?key=REDACTED"), "\(mode): \(run.stdout)")
        }
    }

    /// Found: `--audience id1,id2` was one audience, "id1,id2", while `RISC_AUDIENCES=id1,id2` and
    /// `--set audiences=id1,id2` were two: every SET was then refused `invalid_audience`.
    @Test("--audience takes a comma-separated list as the environment and --set do, for serve and verify")
    func audienceFlagLists() async throws {
        let printed = try await RiscBinary.run([
            "serve", "--audience", "one.apps.googleusercontent.com, two.apps.googleusercontent.com", "--audience", "three", "--jwks-file",
            "keys/test/jwks.json", "--print-config", "--print-config-format", "json",
        ])
        #expect(printed.status == 0, "\(printed.stderr)")
        let audiences = try JSONParser.parseObject(Array(printed.stdout.utf8))["audiences"]
        #expect(audiences?.arrayValue?.compactMap(\.stringValue) == ["one.apps.googleusercontent.com", "two.apps.googleusercontent.com", "three"], "\(printed.stdout.prefix(400))")
        let verified = try await RiscBinary.run([
            "verify", "keys/test/sample-account-disabled.jwt", "--jwks-file", "keys/test/jwks.json", "--issuer", "https://accounts.google.com/",
            "--audience", "other.apps.googleusercontent.com,risc-test-client.apps.googleusercontent.com",
        ])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
    }

    @Test("issue 24 #9: a config of thousands of nested dotted keys is refused with a clear error (exit 64), not a crash")
    func deeplyNestedConfig() async throws {
        let directory = try temporaryDirectory("deep")
        defer { try? FileManager.default.removeItem(at: directory) }
        let toml = directory.appendingPathComponent("deep.toml")
        try Data(("audiences = [\"a\"]\n" + (0..<16_000).map { "k\($0)" }.joined(separator: ".") + " = 1\n").utf8).write(to: toml)
        let json = directory.appendingPathComponent("deep.json")
        try Data(("{\"audiences\": [\"a\"], " + String(repeating: "\"k\": {", count: 16_000) + String(repeating: "}", count: 16_000) + "}").utf8).write(to: json)
        for file in [toml, json] {
            for mode in ["--check-config", "--print-config"] {
                let run = try await RiscBinary.run(["serve", "--config", file.path, mode])
                #expect(run.status == 64 && (run.stderr.contains("deeper than") || run.stderr.contains("too deep")), "\(file.lastPathComponent) \(mode): \(run.status) \(run.stderr.prefix(300))")
            }
        }
    }

    @Test("issue 24: a JSON config file that starts with a UTF-8 byte order mark is read like one without")
    func byteOrderMark() async throws {
        let directory = try temporaryDirectory("bom")
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["risc.json", "risc.conf", "risc.toml"] {
            let file = directory.appendingPathComponent(name)
            let body =
                name.hasSuffix(".toml")
                ? "audiences = [\"a.apps.googleusercontent.com\"]\n[listen]\nport = 7001\n"
                : #"{"audiences": ["a.apps.googleusercontent.com"], "listen": {"port": 7001}}"#
            try Data([0xEF, 0xBB, 0xBF] + Array(body.utf8)).write(to: file)
            let run = try await RiscBinary.run(["serve", "--config", file.path, "--print-config"])
            #expect(run.status == 0 && run.stdout.contains("port = 7001  # file \(file.path)"), "\(name): \(run.status) \(run.stderr)")
        }
    }

    @Test("a TOML config file is held to the same rules as JSON: syntax errors with line and column, unknown keys, wrong types and dates refused with exit 64")
    func tomlErrors() async throws {
        let directory = try temporaryDirectory("toml")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(name: String, text: String, message: String)] = [
            ("syntax", "audiences = [\"a\"]\n[listen\nport = 1\n", "TOML, line 2"),
            ("unknown", "audiences = [\"a\"]\n[listen]\nprot = 9443\n", "unknown setting 'listen.prot'"),
            ("type", "audiences = [\"a\"]\n[listen]\nport = \"high\"\n", "expected a number"),
            ("date", "audiences = [\"a\"]\n[retention]\ndone = 2026-11-24\n", "retention.done: no setting takes a TOML date"),
            ("duplicate", "audiences = [\"a\"]\naudiences = [\"b\"]\n", "TOML, line 2"),
            ("int", "audiences = [\"a\"]\nmax_body_bytes = 9223372036854775807\n", "max_body_bytes: integer out of range"),
            // Found: the least 64-bit integer crashed the check ("Illegal instruction": abs() of it has no 64-bit value).
            ("int-min", "audiences = [\"a\"]\nmax_body_bytes = -9223372036854775808\n", "max_body_bytes: integer out of range"),
            // Found by scripts/fuzz (FuzzFiles): a control character in a table header aborted
            // risc (SIGABRT, an assertion of the TOML parser's), and a NUL ended the document there:
            // what followed it was dropped without a word. TOML allows neither anywhere.
            ("control", "audiences = [\"a\"]\n[\u{01}]\n", "TOML, line 2, column 2: a control character (U+0001)"),
            ("nul", "audiences = [\"a\"]\n# ok\u{00}\n[listen]\nprot = 9443\n", "TOML, line 2, column 5: a control character (U+0000)"),
            ("delete", "audiences = [\"a\u{7F}\"]\n", "TOML, line 1, column 16: a control character (U+007F)"),
            // Found by scripts/fuzz (FuzzFiles): a table header starting with what starts no key
            // aborted risc the same way: a '[' left alone on a line, a '#', '=' or '.' after it, a
            // non-ASCII letter; so did a '}' where an array expects a value, and a date or time cut short
            // or run on ("2026-12-06 0"). A '[' starting a line
            // inside an array value is no header.
            ("open-header", "audiences = [\"a\"]\n[\n", "TOML, line 2, column 2: a table header names a table"),
            ("hash-header", "audiences = [\n  \"a\",\n  [\"b\"],\n]\n[[ #listen]]\n", "TOML, line 5, column 4: a table header names a table"),
            ("letter-header", "audiences = [\"a\"] # [\n[\u{E9}t\u{E9}]\n", "TOML, line 2, column 2: a table header names a table"),
            ("date-space-digit", "audiences = [\"a\"]\n[retention]\ndone = 2026-12-06 0\n", "TOML, line 3, column 8: not a TOML date and time"),
            ("time-cut", "audiences = [\"a\"]\nr = 2206-12-06T0\":60\n", "TOML, line 2, column 5: not a TOML date or time"),
            ("dash-number", "audiences = [\"a\"]\nmax_body_bytes = 11?3-12-04 3\n", "TOML, line 2, column 18: not a TOML date or time"),
            ("quote-in-date", "audiences = [\"a\"]\nmax_body_bytes = 1'03-12-04 3\n", "TOML, line 2, column 18: not a TOML date or time"),
            ("array-brace", "audiences = [\n  \"a\", # one\n}]\n", "TOML, line 3, column 1: '}' where the array expects a value"),
            // Found the same way: a \u0000 escape ended the string there (the parser hands strings
            // back as C strings): `data_dir = "/srv/a\u0000b"` became /srv/a without a word.
            ("nul-escape", "audiences = [\"a\"]\ndata_dir = \"/srv/a\\u0000b\"\n", "TOML, line 2, column 19: a \\u0000 escape (NUL)"),
        ]
        for (name, text, message) in cases {
            let file = directory.appendingPathComponent("\(name).toml")
            try Data(text.utf8).write(to: file)
            for mode in ["--print-config", "--check-config"] {
                let run = try await RiscBinary.run(["serve", "--config", file.path, mode])
                #expect(run.status == 64 && run.stderr.contains(message) && run.stderr.contains(file.path), "\(name) \(mode): \(run.status) \(run.stderr)")
            }
        }
        // Without a .toml or .json name the content decides.
        let unnamed = directory.appendingPathComponent("risc.conf")
        try Data("# comments are fine\naudiences = [\"a.apps.googleusercontent.com\"]\n[listen]\nport = 7000\n".utf8).write(to: unnamed)
        let read = try await RiscBinary.run(["serve", "--config", unnamed.path, "--print-config"])
        #expect(read.status == 0 && read.stdout.contains("port = 7000  # file \(unnamed.path)"), "\(read.stderr)")
    }

    /// Found: a JSON config's `"data_dir": "/srv/a\u0000b"` was taken, and every file call then
    /// stopped at the NUL: the receiver used /srv/a. No path or name can hold one.
    @Test("a NUL in a JSON config's string is refused, naming the key (exit 64)")
    func nulInJSONString() async throws {
        let directory = try temporaryDirectory("nul")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("risc.json")
        try Data(#"{"audiences": ["a"], "data_dir": "/srv/a\u0000b", "store": {"url": "postgres://risc@db/risc\u0000x"}}"#.utf8).write(to: file)
        let run = try await RiscBinary.run(["serve", "--config", file.path, "--check-config"])
        #expect(run.status == 64, "\(run.status) \(run.stdout)")
        #expect(run.stderr.contains("\(file.path): data_dir: holds a NUL character (U+0000)"), "\(run.stderr)")
        #expect(run.stderr.contains("\(file.path): store.url: holds a NUL character (U+0000)"), "\(run.stderr)")
    }

    @Test("deploy/risc.example.toml says what risc.example.json says, passes --check-config, and the other commands read a TOML config too")
    func tomlExample() async throws {
        let toml = try await RiscBinary.run(["serve", "--config", "deploy/risc.example.toml", "--print-config", "--print-config-format", "json"])
        let json = try await RiscBinary.run(["serve", "--config", "deploy/risc.example.json", "--print-config", "--print-config-format", "json"])
        #expect(toml.status == 0 && json.status == 0, "\(toml.stderr) \(json.stderr)")
        #expect(toml.stdout == json.stdout)

        let directory = try temporaryDirectory("toml-example")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)
        let checked = try await RiscBinary.run([
            "serve", "--config", "deploy/risc.example.toml", "--check-config", "--tls-cert", certificate.certificatePath,
            "--tls-key", certificate.keyPath, "--data-dir", directory.appendingPathComponent("data").path,
        ])
        #expect(checked.status == 0 && checked.stdout.contains("configuration OK"), "\(checked.stderr)")

        // `risc queue` finds the store where the TOML file's data_dir says (here: none there yet).
        let config = directory.appendingPathComponent("risc.toml")
        let data = directory.appendingPathComponent("elsewhere").path
        try Data("audiences = [\"a\"]\ndata_dir = \"\(data)\"  # where the store lives\n".utf8).write(to: config)
        let queue = try await RiscBinary.run(["queue", "status", "--config", config.path], directory: directory)
        #expect(queue.status == 64 && queue.stderr.contains("no store in \(data)"), "\(queue.stderr)")
        // Issue 26 §10: the command line was fine; the usage text would not help.
        #expect(!queue.stderr.contains("Usage:"), "\(queue.stderr)")
    }
}
