import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

@Suite("risc serve (the built binary)", .serialized)
struct ServeCommandTests {
    static func freePort() throws -> Int {
        let server = try LoopbackHTTPServer { _ in .init() }
        let port = server.port
        server.stop()
        return port
    }

    /// Starts `risc serve` with the test keys (pinned, unless `pinned` is false and `extra` names a
    /// discovery URL); returns the process, its data directory and ports once ready (asked every
    /// 100 ms, `seconds` × 10 times). The server binds port 0 (or `ports`) and its own `risc ready`
    /// line names the ports it got: a port picked free beforehand could be taken by another
    /// test's receiver meanwhile, whose `/readyz` then answered for this one (which had exited).
    static func startServe(
        extra: [String] = [], readyWithin seconds: Int = 60, data: URL? = nil, pinned: Bool = true, stderr: String? = nil,
        ports: (port: Int, admin: Int) = (0, 0), runAs wrapper: [String] = []
    ) async throws -> (process: ChildProcess, data: URL, port: Int, admin: Int) {
        let data = data ?? Scratch.root.appendingPathComponent("risc-serve-\(UUID().uuidString)")
        let errors = stderr ?? Scratch.root.appendingPathComponent("risc-serve-\(UUID().uuidString).err").path
        defer { if stderr == nil { try? FileManager.default.removeItem(atPath: errors) } }
        let process = ChildProcess()
        process.executableURL = wrapper.first.map { URL(fileURLWithPath: $0) } ?? RiscBinary.url
        process.currentDirectoryURL = RiscBinary.repository
        process.arguments =
            Array(wrapper.dropFirst()) + (wrapper.isEmpty ? [String]() : [RiscBinary.url.path])
            + [
                "serve", "--audience", SETFactory.defaultAudience, "--issuer",
                SETFactory.defaultIssuer, "--host", "127.0.0.1", "--port", "\(ports.port)", "--admin-port", "\(ports.admin)",
                "--data-dir", data.path,
            ] + (pinned ? ["--jwks-file", "keys/test/jwks.json"] : []) + extra
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errors) ?? FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let client = CurlHTTPClient.patient()
        var bound: (port: Int, admin: Int)?
        var ready = false
        for _ in 0..<(seconds * 10) where !ready && process.isRunning {
            if bound == nil { bound = readyPorts((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "") }
            if let bound { ready = (try? await client.perform(HTTPRequest(url: "http://127.0.0.1:\(bound.admin)/readyz")))?.status == 200 }
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        if ready, process.isRunning, let bound { return (process, data, bound.port, bound.admin) }
        if process.isRunning { process.terminate() }
        await process.exited()
        let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        throw NotReady(description: "the server did not become ready: \(said.suffix(2_000))")
    }

    /// The ports in a `risc ready` line (text or JSON log format); nil before there is one.
    static func readyPorts(_ stderr: String) -> (port: Int, admin: Int)? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("risc ready") }) else { return nil }
        func number(_ key: String) -> Int? {
            guard let match = line.range(of: key + #"\"?[=:]\"?[0-9]+"#, options: .regularExpression) else { return nil }
            return Int(line[match].drop { !$0.isNumber })
        }
        guard let port = number("risc.port"), let admin = number("risc.admin_port") else { return nil }
        return (port, admin)
    }

    struct NotReady: Error, CustomStringConvertible { let description: String }

    @Test("runs on embedded defaults with only the audience and keys given, answers 202, exits 0 on SIGTERM")
    func servesAndStops() async throws {
        let (process, data, port, _) = try await Self.startServe()
        let client = CurlHTTPClient.patient()
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let response = try await client.perform(
            HTTPRequest(
                method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(token.utf8)))
        #expect(response.status == 202)
        process.terminate()  // SIGTERM
        await process.exited()
        #expect(process.terminationStatus == 0)
        let log = try String(contentsOf: data.appendingPathComponent("events.log"), encoding: .utf8)
        #expect(log.contains(#""jti":"sample-0001""#))
        #expect(log.contains(#""outcome":"stopped""#))
        #expect(!log.contains(token))
    }

    @Test("the harness's receiver is the one it started: one that cannot bind (another receiver has its admin port) is reported, not taken for the other")
    func startServeNamesItsOwnReceiver() async throws {
        let (first, _, _, admin) = try await Self.startServe()
        defer { first.terminate(); first.waitUntilExit() }
        await #expect(throws: NotReady.self) {
            let (second, _, _, _) = try await Self.startServe(ports: (0, admin))
            second.terminate()
        }
    }

    @Test("a listener that cannot take its address names its settings: exit 69 for a port in use, 64 for an address not here (NIO's bind error, exit 1, before)")
    func listenerPortInUse() async throws {
        let (first, _, port, admin) = try await Self.startServe()
        defer { first.terminate(); first.waitUntilExit() }
        let cases = [
            (["--host", "127.0.0.1", "--port", "\(port)", "--admin-port", "0"], 69, "127.0.0.1:\(port) (listen.host, listen.port): the address is in use"),
            (["--host", "127.0.0.1", "--port", "0", "--admin-port", "\(admin)"], 69, "127.0.0.1:\(admin) (admin.host, admin.port): the address is in use"),
            // TEST-NET-1: no such address here, which waiting does not change.
            (["--host", "192.0.2.1", "--port", "0", "--admin-port", "0"], 64, "192.0.2.1:0 (listen.host, listen.port): no such address on this machine"),
        ]
        for (flags, status, said) in cases {
            let data = Scratch.root.appendingPathComponent("risc-inuse-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: data) }
            let other = try await RiscBinary.run(
                [
                    "serve", "--audience", SETFactory.defaultAudience, "--jwks-file", "keys/test/jwks.json", "--issuer", SETFactory.defaultIssuer,
                    "--data-dir", data.path,
                ] + flags)
            #expect(other.status == status, "\(other.stderr)")
            // An address not here is found before the start binds (the preflight, as --check-config).
            #expect(other.stderr.contains(status == 64 ? "  - cannot listen on " + said : "risc serve: cannot listen on " + said), "\(other.stderr)")
            // Found: with the public port taken, the admin listener (started beside it) was
            // cancelled mid-start and logged `error risc: Waiting on child channel:
            // CancellationError()` and `Server shutdown error: Already closed` before the message.
            #expect(!other.stderr.contains(" error ") && !other.stderr.contains("CancellationError"), "\(other.stderr)")
        }
    }

    @Test("a second risc serve on the same data directory refuses to start, naming the first; the first keeps serving")
    func dataDirectoryLock() async throws {
        let (process, data, port, _) = try await Self.startServe()
        defer { process.terminate(); process.waitUntilExit() }
        let other = try await RiscBinary.run([
            "serve", "--audience", SETFactory.defaultAudience, "--jwks-file", "keys/test/jwks.json", "--issuer", SETFactory.defaultIssuer,
            "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--data-dir", data.path,
        ])
        #expect(other.status == 64)
        #expect(other.stderr.contains("in use by another risc serve (pid \(process.processIdentifier))"), "\(other.stderr)")
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let response = try await CurlHTTPClient.patient().perform(
            HTTPRequest(method: "POST", url: "http://127.0.0.1:\(port)/events", body: Array(token.utf8)))
        #expect(response.status == 202)
    }

    @Test("every configuration problem is reported at once, naming its source; exit 64")
    func configurationErrors() async throws {
        let file = Scratch.root.appendingPathComponent("risc-config-\(UUID().uuidString).json")
        try Data(
            #"{"audiences": ["a"], "listen": {"port": "eighty"}, "jwks": {"min_tll": 5}, "retry_after": 0, "actions": {"table": {"nonsense": {"": ["log_only"]}, "account-disabled": {"hijacking": ["fly"]}}}}"#
                .utf8
        ).write(to: file)
        let process = ChildProcess()
        process.executableURL = RiscBinary.url
        process.arguments = ["serve", "--config", file.path]
        var environment = ProcessInfo.processInfo.environment
        environment["RISC_ADMIN_PORT"] = "x"
        environment["RISC_NOT_A_SETTING"] = "1"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let text = await BlockingPool.waits.run { String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        await process.exited()
        #expect(process.terminationStatus == 64)
        #expect(text.contains("listen.port: expected a number"))
        #expect(text.contains("unknown setting 'jwks.min_tll'"))
        #expect(text.contains("RISC_ADMIN_PORT: expected a number"))
        #expect(text.contains("unknown variable RISC_NOT_A_SETTING"))
        #expect(text.contains("retry_after"))
        #expect(text.contains("unknown event type 'nonsense'"))
        #expect(text.contains("actions.table.account-disabled.hijacking: expected a non-empty list"))
    }

    /// Found: `risc serve --data-dir d` (a data directory of one letter, or under one, not made
    /// yet) crashed with "Illegal instruction" before its first line: Foundation's
    /// `deletingLastPathComponent` traps on a one-character path without a slash, and the check of
    /// the directory's parent called it. risc takes a path's directory by its own rule now.
    @Test("a data directory named by one letter, or under one, not made yet: checked and made, no crash")
    func oneLetterDataDirectory() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-one-letter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = RiscBinary.repository.appendingPathComponent("keys/test/jwks.json").path
        for dataDirectory in ["d", "e/f"] {
            let checked = try await RiscBinary.run(
                ["serve", "--audience", "a", "--jwks-file", keys, "--issuer", "https://accounts.google.com/", "--data-dir", dataDirectory, "--check-config"],
                directory: directory)
            #expect(checked.status == 0 && checked.stdout.contains("configuration OK"), "\(dataDirectory): \(checked.status) \(checked.stderr.prefix(300))")
        }
    }

    /// Found: `--host [::1]` (an IPv6 address as URLs write it) passed `--check-config`, which then
    /// showed `http://[[::1]]:8443`, and the start failed: "UnknownHost … for host [::1]". The
    /// brackets are taken off when the setting is read, for every listener.
    @Test("a listener address in brackets ([::1]) is the IPv6 address: shown once bracketed, bound as such")
    func bracketedListenerAddress() async throws {
        let checked = try await RiscBinary.run(["serve", "--audience", "a", "--host", "[::1]", "--set", "admin.host=[::1]", "--admin-port", "9091", "--check-config"])
        #expect(checked.status == 0 && checked.stdout.contains("http://[::1]:8443/events") && checked.stdout.contains("http://[::1]:9091"), "\(checked.stdout) \(checked.stderr)")
        // Digits alone in every label are no IPv4 address and no name: refused, not left to the bind.
        let digits = try await RiscBinary.run(["serve", "--audience", "a", "--host", "1.2.3.4.5", "--check-config"])
        #expect(digits.status == 64 && digits.stderr.contains("listen.host must be an IP address or a host name, got '1.2.3.4.5'"), "\(digits.stderr)")
    }

    /// Issue 26 §5: `port must be 0–65535` named neither the key nor where it came from, and
    /// `listen = 8443` read as an unknown setting; a public listener on 0.0.0.0 and the admin one on
    /// 127.0.0.1 with one port passed the check and failed the start.
    @Test("a value's problem names its key and its source; a value where a table belongs says so; listeners that would take one address are refused")
    func problemsNameKeyAndSource() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-sources-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let table = directory.appendingPathComponent("table.toml").path, ports = directory.appendingPathComponent("ports.toml").path
        try "audiences = [\"a\"]\nlisten = 8443\n".write(toFile: table, atomically: true, encoding: .utf8)
        try "audiences = [\"a\"]\n[listen]\nport = 70000\n".write(toFile: ports, atomically: true, encoding: .utf8)
        let scalar = try await RiscBinary.run(["serve", "--config", table, "--check-config"])
        #expect(scalar.status == 64)
        #expect(scalar.stderr.contains("'listen' is a table of settings (listen.host, listen.port), not a value"), "\(scalar.stderr)")
        #expect(!scalar.stderr.contains("unknown setting"))
        let sourced = try await RiscBinary.run(["serve", "--config", ports, "--admin-port", "99999", "--check-config"])
        #expect(sourced.stderr.contains("listen.port must be 0–65535, got 70000 (listen.port from file \(ports))"), "\(sourced.stderr)")
        #expect(sourced.stderr.contains("admin.port must be 0–65535, got 99999 (admin.port from flag)"), "\(sourced.stderr)")
        let shared = try await RiscBinary.run(["serve", "--audience", "a", "--port", "9090", "--admin-port", "9090", "--check-config"])
        #expect(shared.status == 64)
        #expect(shared.stderr.contains("listen.port and admin.port must differ (listen.port from flag; admin.port from flag)"), "\(shared.stderr)")
    }

    @Test("an IPv6 listen address is shown as URLs write it: http://[::1]:8443/events (an operator copies it into Google's stream registration)")
    func ipv6AddressesAsURLs() async throws {
        let checked = try await RiscBinary.run([
            "serve", "--audience", "a", "--host", "::1", "--port", "8443", "--set", "admin.host=::1", "--admin-port", "9091", "--check-config",
        ])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.contains("listen    http://[::1]:8443/events"), "\(checked.stdout)")
        #expect(checked.stdout.contains("admin     http://[::1]:9091 "), "\(checked.stdout)")
    }
}

extension ServeCommandTests {
    @Test("issue 24 #6: a data directory that exists is not trusted blindly: links in it, another owner, group or world access refused (exit 64) unless accept_insecure_permissions")
    func dataDirectoryTrust() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-trust-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let victim = directory.appendingPathComponent("precious").path
        try Data("not to be truncated\n".utf8).write(to: URL(fileURLWithPath: victim))
        func dataDirectory(_ name: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try PrivateFiles.makeDirectory(path)
            return path
        }
        func serve(_ data: String, _ extra: [String] = []) async throws -> RiscBinary.Result {
            try await RiscBinary.run(
                [
                    "serve", "--audience", "a", "--jwks-file", "keys/test/jwks.json", "--port", "0", "--admin-port", "0", "--host", "127.0.0.1",
                    "--data-dir", data,
                ] + extra)
        }
        // Planted links: the lock file (its target was truncated before), the event log.
        for name in ["risc.lock", "events.log"] {
            let data = try dataDirectory("links-\(name)")
            try FileManager.default.createSymbolicLink(atPath: data + "/" + name, withDestinationPath: victim)
            for mode in [["--check-config"], []] {
                let run = try await serve(data, mode)
                #expect(run.status == 64 && run.stderr.contains("\(data)/\(name) is a symbolic link"), "\(name) \(mode): \(run.status) \(run.stderr)")
            }
            // Not even the opt-out follows a link.
            #expect(try await serve(data, ["--set", "accept_insecure_permissions=true", "--check-config"]).status == 64)
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "not to be truncated\n")

        // A world-readable token key planted in the data directory; a group-writable directory.
        let planted = try dataDirectory("planted-key")
        _ = FileManager.default.createFile(atPath: planted + "/token-key", contents: Data(repeating: 1, count: 32), attributes: [.posixPermissions: 0o644])
        let open = try dataDirectory("open-directory")
        chmod(open, 0o777)
        for (data, problem) in [
            (planted, "key file \(planted)/token-key is readable or writable by group or others (mode 644)"),
            (open, "directory \(open) is writable by group or others (mode 777)"),
        ] {
            for mode in [["--check-config"], []] {
                let run = try await serve(data, mode)
                #expect(run.status == 64 && run.stderr.contains(problem), "\(mode): \(run.status) \(run.stderr)")
            }
            let accepted = try await serve(data, ["--set", "accept_insecure_permissions=true", "--check-config"])
            #expect(accepted.status == 0, "\(accepted.stderr)")
        }
        // Found: a data directory reached through a symbolic link (`/var/lib/risc` → a larger disk)
        // was refused as "writable by group or others (mode 777): chmod 0700 it": the link's own
        // mode, which chmod cannot change. The directory it leads to is what is checked; an open
        // one behind a link is still refused, naming both.
        let target = try dataDirectory("link-target")
        let linked = target + "-link"
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: target)
        let throughLink = try await serve(linked, ["--check-config"])
        #expect(throughLink.status == 0, "\(throughLink.stderr)")
        chmod(target, 0o777)
        let openBehind = try await serve(linked, ["--check-config"])
        #expect(
            openBehind.status == 64 && openBehind.stderr.contains("directory \(linked) (a link to \(target)) is writable by group or others (mode 777)"),
            "\(openBehind.stderr)")
        chmod(target, 0o700)
        // Another user's directory (only root can make one here).
        if geteuid() == 0 {
            let foreign = try dataDirectory("foreign")
            chown(foreign, 65_534, 65_534)
            let run = try await serve(foreign, ["--check-config"])
            #expect(run.status == 64 && run.stderr.contains("is owned by uid 65534"), "\(run.stderr)")
        }
    }

    /// Found: run as an unprivileged user (as `deploy/risc.service` runs it), the receiver reset
    /// every connection to its push endpoint before reading a byte: it set `TCP_NODELAY` at the
    /// socket level (`.socketOption(.tcp_nodelay)`), which is `SO_DEBUG` there, and only
    /// `CAP_NET_ADMIN` may set that (EACCES closed the connection). As root the call passed,
    /// turning socket debugging on and leaving Nagle's algorithm on the answers.
    @Test("a receiver run as an unprivileged user answers on its push endpoint")
    func unprivilegedUser() async throws {
        let data = Scratch.root.appendingPathComponent("risc-unprivileged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // As root, as `nobody` (the suite's files are readable by all); otherwise as this user already.
        let wrapper = geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "nobody", "--"] : []
        if geteuid() == 0 { #expect(chown(data.path, 65_534, 65_534) == 0) }
        let (process, _, port, _) = try await Self.startServe(data: data, runAs: wrapper)
        defer { process.terminate() }
        let client = CurlHTTPClient()
        let garbage = try await client.perform(
            HTTPRequest(method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array("x".utf8)))
        #expect(garbage.status == 400)
        let factory = SETFactory(signer: try #require(try KeyDirectory.repositoryTestKeys().entry(for: .rs256)).signer)
        let token = try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("1001"), jti: "unprivileged-1")
        let accepted = try await client.perform(
            HTTPRequest(method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array(token.utf8)))
        #expect(accepted.status == 202)
    }

    @Test("--check-config: the example config is valid once its files exist; missing files are each named")
    func checkConfig() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-check-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)
        let good = try await RiscBinary.run([
            "serve", "--config", "deploy/risc.example.json", "--check-config", "--tls-cert", certificate.certificatePath,
            "--tls-key", certificate.keyPath, "--data-dir", directory.appendingPathComponent("data").path,
        ])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("configuration OK") && good.stdout.contains("https://0.0.0.0:8443/events"))
        #expect(good.stdout.contains("tls       certificate valid until ") && good.stdout.contains(" hours left)"), "\(good.stdout)")
        // Found: a certificate good for most of a day more read "(0 days left)".
        #expect(good.stdout.contains("(23 hours left)") || good.stdout.contains("(22 hours left)"), "\(good.stdout)")
        // A key that is not the certificate's: named before any restart or reload trips on it.
        let other = try TestCertificate(directory: directory.appendingPathComponent("other"))
        let mismatched = try await RiscBinary.run([
            "serve", "--config", "deploy/risc.example.json", "--check-config", "--tls-cert", certificate.certificatePath,
            "--tls-key", other.keyPath, "--data-dir", directory.appendingPathComponent("data").path,
        ])
        #expect(mismatched.status == 64)
        #expect(mismatched.stderr.contains("do not make a usable pair"), "\(mismatched.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("data").path))  // checked, not created
        let bad = try await RiscBinary.run(["serve", "--config", "deploy/risc.example.json", "--check-config", "--jwks-file", "/nonexistent.json"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("tls.certificate: cannot read /etc/risc/tls/fullchain.pem"))
        #expect(bad.stderr.contains("jwks_file: cannot read /nonexistent.json"))
    }

    @Test("SIGHUP reopens the event log (rotation) and reloads a renewed TLS certificate, without a restart")
    func hangup() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-hup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try TestCertificate(directory: directory.appendingPathComponent("first"))
        let renewed = try TestCertificate(directory: directory.appendingPathComponent("renewed"))
        let cert = directory.appendingPathComponent("cert.pem").path, key = directory.appendingPathComponent("key.pem").path
        try first.install(certificateAt: cert, keyAt: key)
        let (process, data, port, _) = try await Self.startServe(extra: ["--tls-cert", cert, "--tls-key", key])
        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        func post(trusting pair: TestCertificate) async throws -> Int {
            try await CurlHTTPClient.patient(caBundlePath: pair.certificatePath).perform(
                HTTPRequest(
                    method: "POST", url: "https://localhost:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")],
                    body: Array(token.utf8))
            ).status
        }
        #expect(try await post(trusting: first) == 202)
        let log = data.appendingPathComponent("events.log"), rotated = data.appendingPathComponent("events.log.1")
        // Its `received` line is written once the store holds it, just after the 202 (the journal).
        for _ in 0..<100 where !((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains(#""outcome":"accepted""#) {
            try await Task.sleep(for: .milliseconds(50))
        }
        try FileManager.default.moveItem(at: log, to: rotated)
        try renewed.install(certificateAt: cert, keyAt: key)
        process.signal(SIGHUP)
        // Lines written before the reopen stay in the rotated file; the reload's line may be either side.
        func reloadLogged() -> Bool {
            [log, rotated].contains { ((try? String(contentsOf: $0, encoding: .utf8)) ?? "").contains(#""step":"tls","outcome":"reloaded""#) }
        }
        for _ in 0..<100 where !(reloadLogged() && FileManager.default.fileExists(atPath: log.path)) {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(reloadLogged())
        #expect(FileManager.default.fileExists(atPath: log.path), "events.log was not reopened")
        #expect(try await post(trusting: renewed) == 202)
        process.terminate()
        await process.exited()
        #expect(process.terminationStatus == 0)
        #expect(try String(contentsOf: rotated, encoding: .utf8).contains(#""outcome":"accepted""#))
        #expect(try String(contentsOf: log, encoding: .utf8).contains(#""outcome":"duplicate""#))
    }
}
