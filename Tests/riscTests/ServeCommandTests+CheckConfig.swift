import Foundation
import RISCTestKit
import Testing

extension ServeCommandTests {
    /// Issue 16: a too-short webhook secret, a data directory that is a file and bad
    /// trusted_proxies passed `--check-config`; serve then refused (exit 1) or ran with them.
    @Test("--check-config refuses whatever serve refuses, with the same words; both exit 64")
    func checkConfigParity() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-parity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func file(_ name: String, _ text: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
        let short = try file("short", "only-ten-b\n"), good = try file("good", "a-secret-of-enough-length\n")
        let notAFile = try file("not-a-directory", ""), badJWKS = try file("bad-jwks.json", "{\"keys\": 5}")
        let shortKey = try file("short-key", "0123456789")
        let base = [
            "serve", "--audience", "a", "--jwks-file", "keys/test/jwks.json", "--port", "0", "--admin-port", "0",
            "--host", "127.0.0.1", "--data-dir", directory.appendingPathComponent("data").path,
        ]
        var cases: [([String], String)] = [
            (["--set", "webhook.url=http://127.0.0.1:9/hook", "--set", "webhook.secret_file=\(short)"], "webhook.secret_file: the secret in \(short) must be at least 16 bytes"),
            (["--data-dir", notAFile], "data_dir: \(notAFile) exists and is not a directory"),
            (["--set", "trusted_proxies=10.0.0.300"], "trusted_proxies: '10.0.0.300' is not an IP address"),
            (["--set", "trusted_proxies=proxy.internal"], "trusted_proxies: 'proxy.internal'"),
            (["--set", "admin.token_file=\(short)"], "admin.token_file: the token in \(short) must be at least 16 bytes"),
            (["--jwks-file", badJWKS], "jwks_file: \(badJWKS)"),
            // Issue 26 §5: a directory passed the check, and the start failed on it; unreadable files say why.
            (["--jwks-file", directory.path], "jwks_file: cannot read \(directory.path): Is a directory"),
            (["--set", "accounts.token_key_file=\(directory.path)/missing"], "accounts.token_key_file: cannot read \(directory.path)/missing: No such file or directory"),
            // Issue 24 #4: a password goes only to a server whose certificate is checked.
            (
                ["--set", "store.url=postgres://risc@127.0.0.1:9/risc?sslmode=require", "--set", "store.password_file=\(good)"],
                "store.password_file is sent only over sslmode=verify-full"
            ),
            (["--set", "accounts.token_key_file=\(shortKey)"], "accounts.token_key_file: \(shortKey) holds 10 bytes"),
            (
                ["--set", "linking.google_client_id=c", "--set", "linking.revocation_path=/revoke", "--set", "linking.client_secret_file=\(short)"],
                "linking.client_secret_file: the secret in \(short) must be at least 16 bytes"
            ),
        ]
        // Found by a sweep of every setting: a device or a named pipe for a file, a listen address
        // that does not resolve or is not here, passed the check; the start failed in other words
        // (exit 1), and a pipe held both for ever, waiting for a writer.
        let pipe = directory.appendingPathComponent("pipe").path
        try #require(mkfifo(pipe, 0o600) == 0)
        for special in ["/dev/null", pipe] {
            cases += [
                (["--jwks-file", special], "jwks_file: cannot read \(special): not a regular file"),
                (["--set", "accounts.token_key_file=\(special)"], "accounts.token_key_file: cannot read \(special): not a regular file"),
                (["--set", "admin.token_file=\(special)"], "admin.token_file: cannot read \(special): not a regular file"),
                (["--set", "event_log_checkpoint_key=\(special)"], "event_log_checkpoint_key: cannot read \(special): not a regular file"),
                (
                    ["--set", "tls.certificate=\(special)", "--set", "tls.key=keys/test/risc-test-rs256.pem"],
                    "tls.certificate: cannot read \(special): not a regular file"
                ),
            ]
        }
        // A transmitter's files were not looked at by the check at all: a missing key set or
        // credential passed it and the start refused it; a pipe held the start.
        func transmitter(_ members: String) -> [String] {
            ["--set", #"transmitters={"okta": {"dialect": "ssf", "issuer": "https://okta.example.com", "audiences": ["x"], "path": "/okta", "# + members + "}}"]
        }
        let jwks = #""jwks_file": "keys/test/jwks.json""#
        let threeLines = try file("three-lines", "a\nb\nc\n")
        cases += [
            (transmitter(#""jwks_file": "\#(directory.path)/missing""#), "transmitters.okta.jwks_file: cannot read \(directory.path)/missing: No such file"),
            (transmitter(#""jwks_file": "\#(badJWKS)""#), "transmitters.okta.jwks_file: \(badJWKS)"),
            (transmitter(jwks + #", "authorization_file": "\#(pipe)""#), "transmitters.okta.authorization_file: cannot read \(pipe): not a regular file"),
            (transmitter(jwks + #", "authorization_file": "\#(threeLines)""#), "transmitters.okta.authorization_file: must hold one non-empty line"),
            (
                transmitter(jwks + #", "delivery": "poll", "poll_url": "https://okta.example.com/poll", "management_token_file": "\#(pipe)""#),
                "transmitters.okta.management_token_file: cannot read \(pipe): not a regular file"
            ),
            // A push transmitter's management token (for `risc stream` only, not read by a start)
            // not made yet must not hide a key set the start refuses.
            (
                transmitter(#""jwks_file": "\#(badJWKS)", "management_token_file": "\#(directory.path)/not-yet""#),
                "transmitters.okta.jwks_file: \(badJWKS)"
            ),
            (["--host", "no-such-host.invalid"], "cannot listen on no-such-host.invalid:0 (listen.host, listen.port): the name does not resolve"),
            (["--set", "admin.host=no-such-host.invalid"], "cannot listen on no-such-host.invalid:0 (admin.host, admin.port): the name does not resolve"),
            (["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:0 (listen.host, listen.port): no such address on this machine"),
        ]
        for (extra, problem) in cases {
            let checked = try await RiscBinary.run(base + extra + ["--check-config"], killedAfter: 60)
            #expect(checked.status == 64 && checked.stderr.contains(problem), "check-config \(extra): \(checked.status) \(checked.stderr)")
            #expect(!checked.stderr.contains("Usage:"), "a configuration error is not a usage error")
            let served = try await RiscBinary.run(base + extra, killedAfter: 60)
            #expect(served.status == 64 && served.stderr.contains(problem), "serve \(extra): \(served.status) \(served.stderr)")
        }
        // Found: a data directory that is a device (`/dev/null`, mode 666) was also told to be
        // chmod 0700ed as a directory: one fault, said once.
        let device = try await RiscBinary.run(base + ["--data-dir", "/dev/null", "--check-config"])
        #expect(device.status == 64 && device.stderr.contains("data_dir: /dev/null exists and is not a directory"), "\(device.stderr)")
        #expect(!device.stderr.contains("writable by group or others"), "\(device.stderr)")
        // Found: as root, access() calls sysfs writable, so the check said OK for a data directory
        // in /sys, new or existing, and the start then failed ("Operation not permitted"). The
        // check now writes there as the start would, and says what the system said.
        for (path, problem) in [
            ("/sys/risc-check-\(UUID().uuidString)", "cannot be created in /sys:"), ("/sys/kernel", "data_dir: /sys/kernel is not writable:"),
        ] {
            let special = try await RiscBinary.run(base + ["--data-dir", path, "--check-config"])
            #expect(special.status == 64 && special.stderr.contains(problem), "\(path): \(special.status) \(special.stderr)")
        }
        // Ranges and IPv6 are addresses too; a good secret passes.
        let fine = try await RiscBinary.run(
            base + [
                "--set", "trusted_proxies=10.0.0.0/8,2001:db8::/32,127.0.0.1", "--set", "webhook.url=http://127.0.0.1:9/hook",
                "--set", "webhook.secret_file=\(good)", "--check-config",
            ])
        #expect(fine.status == 0, "\(fine.stderr)")
        // Issue 26 §5: the start's warnings, printed by the check too.
        let exposed = try await RiscBinary.run(base + ["--set", "admin.host=0.0.0.0", "--check-config"])
        #expect(exposed.status == 0 && exposed.stdout.contains("warning   the admin listener 0.0.0.0:0 serves plain HTTP"), "\(exposed.stdout)")
    }
}
