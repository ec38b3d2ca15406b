import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

/// The deployment files checked with what this machine has (there is no container engine here,
/// so the Containerfile is read, not built; issue 26 §10).
@Suite("deploy/ files (read, not run)")
struct DeployFilesTests {
    static func file(_ path: String) throws -> String {
        try String(contentsOf: RiscBinary.repository.appendingPathComponent(path), encoding: .utf8)
    }

    /// Checks a proxy's configuration with its own `check` arguments and, when it passes, starts the
    /// proxy in the foreground with `run` (its output discarded); nil when the check failed (an
    /// expectation records why). The caller stops it.
    static func startProxy(_ executable: String, check: [String], run: [String]) async throws -> ChildProcess? {
        let checked = try await RiscBinary.run(check, executable: URL(fileURLWithPath: executable))
        #expect(checked.status == 0, "\(checked.stdout) \(checked.stderr)")
        guard checked.status == 0 else { return nil }
        let proxy = ChildProcess()
        proxy.executableURL = URL(fileURLWithPath: executable)
        proxy.arguments = run
        proxy.standardOutput = FileHandle.nullDevice
        proxy.standardError = FileHandle.nullDevice
        try proxy.run()
        return proxy
    }

    /// The Containerfile's instructions: comments and blank lines dropped, continued lines joined.
    static func instructions(_ text: String) -> [(keyword: String, arguments: String)] {
        var result: [(String, String)] = []
        var pending = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") || (trimmed.isEmpty && pending.isEmpty) { continue }
            if trimmed.hasSuffix("\\") {
                pending += trimmed.dropLast() + " "
                continue
            }
            let whole = pending + trimmed
            pending = ""
            guard !whole.isEmpty else { continue }
            let parts = whole.split(separator: " ", maxSplits: 1).map(String.init)
            result.append((parts[0], parts.count > 1 ? parts[1] : ""))
        }
        return result
    }

    @Test(
        "deploy/risc.sysusers makes, with systemd-sysusers, the user and group the unit runs as, its home the unit's state directory, no login shell",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-sysusers"))
    )
    func sysusers() async throws {
        let root = Scratch.root.appendingPathComponent("risc-sysusers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("usr/lib/sysusers.d")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("etc"), withIntermediateDirectories: true)
        try Self.file("deploy/risc.sysusers").write(to: directory.appendingPathComponent("risc.conf"), atomically: true, encoding: .utf8)
        let made = try await RiscBinary.run(["--root=\(root.path)"], executable: URL(fileURLWithPath: "/usr/bin/systemd-sysusers"))
        #expect(made.status == 0, "\(made.stderr)")
        let unit = try Self.file("deploy/risc.service")
        let user = try #require(unit.firstMatch(of: /\nUser=(\S+)/)).1, group = try #require(unit.firstMatch(of: /\nGroup=(\S+)/)).1
        let state = try #require(unit.firstMatch(of: /\nStateDirectory=(\S+)/)).1
        let passwd = try String(contentsOf: root.appendingPathComponent("etc/passwd"), encoding: .utf8).split(separator: "\n")
        let entry = try #require(passwd.first { $0.hasPrefix("\(user):") }, "no \(user) in \(passwd)").split(separator: ":", omittingEmptySubsequences: false)
        #expect(entry.count == 7 && entry[5] == "/var/lib/\(state)" && entry[6] == "/usr/sbin/nologin", "\(entry)")
        let groups = try String(contentsOf: root.appendingPathComponent("etc/group"), encoding: .utf8)
        #expect(groups.split(separator: "\n").contains { $0.hasPrefix("\(group):") && $0.split(separator: ":")[2] == entry[3] }, "\(groups)")
    }

    @Test(
        "the Containerfile: known instructions, every file it copies and scripts/man reads is in the build context, JSON entry point and command naming the unit's TOML config, health check on the admin port, a stop timeout over the drain"
    )
    func containerfile() throws {
        let text = try Self.file("deploy/Containerfile")
        let steps = Self.instructions(text)
        let known: Set = ["FROM", "RUN", "WORKDIR", "ARG", "ENV", "COPY", "USER", "VOLUME", "EXPOSE", "STOPSIGNAL", "HEALTHCHECK", "ENTRYPOINT", "CMD"]
        for step in steps { #expect(known.contains(step.keyword), "unknown instruction \(step.keyword)") }
        let stages = steps.filter { $0.keyword == "FROM" }
        #expect(stages.count == 2 && stages[0].arguments.hasSuffix(" AS build"))
        // Files copied from the build context exist; the build stage has everything scripts/man reads.
        var copied: [String] = []
        for step in steps where step.keyword == "COPY" && !step.arguments.hasPrefix("--from") {
            let source = String(step.arguments.split(separator: " ")[0])
            copied.append(source)
            #expect(FileManager.default.fileExists(atPath: RiscBinary.repository.appendingPathComponent(source).path), "COPY \(source): not in the repository")
        }
        let man = try Self.file("scripts/man")
        for match in man.matches(of: /\$root\/(docs\/[A-Za-z0-9_.\/-]+)/) {
            let path = String(match.1)
            #expect(copied.contains { path == $0 || path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }, "scripts/man reads \(path), which the build stage does not copy")
        }
        for keyword in ["ENTRYPOINT", "CMD"] {
            let arguments = try #require(steps.last { $0.keyword == keyword }?.arguments)
            #expect((try? JSONParser.parse(arguments).arrayValue) != nil, "\(keyword) is not a JSON array: \(arguments)")
        }
        let unit = try Self.file("deploy/risc.service")
        let unitConfig = try #require(unit.firstMatch(of: /ExecStart=\S+ serve --config (\S+)/)?.1)
        #expect(steps.last { $0.keyword == "CMD" }?.arguments == #"["--config", "\#(unitConfig)"]"#, "the container and the unit name different config files")
        #expect(text.contains("\(unitConfig):\(unitConfig):ro"), "the docker run example mounts another config")
        let health = try #require(steps.last { $0.keyword == "HEALTHCHECK" }?.arguments)
        #expect(health.contains("http://127.0.0.1:9090/healthz"))
        #expect(steps.last { $0.keyword == "EXPOSE" }?.arguments == "8443 9090")
        // Docker waits 10 s before SIGKILL unless told; a stop drains for up to limits.drain_timeout (20 s).
        let stopTimeout = try #require(text.firstMatch(of: /--stop-timeout (\d+)/).map { Int($0.1)! })
        #expect(stopTimeout > 20, "--stop-timeout \(stopTimeout) is not over the default drain of 20 s")
        let unitStop = try #require(unit.firstMatch(of: /TimeoutStopSec=(\d+)/).map { Int($0.1)! })
        #expect(unitStop > 20)
    }
}

/// Found (noticed for weeks, checked now): `deploy/risc.service` filters system calls
/// (`SystemCallFilter=`), and nothing here ran risc under that filter: a call outside it would
/// fail with EPERM only in production (systemd is not PID 1 here). The receiver is traced as the
/// unit runs it (an unprivileged user) through a start with the key set fetched, SETs, metrics,
/// SIGHUP and SIGTERM, and every call it made must be one the unit's filter allows.
@Suite("deploy/risc.service's system call filter, against a traced receiver")
struct SystemCallFilterTests {
    static let strace = "/usr/bin/strace", analyze = "/usr/bin/systemd-analyze", python = "/usr/bin/python3"
    static var available: Bool { [strace, analyze, python].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    /// Calls the filter denies that risc makes and goes on without, each with why it may.
    static let tolerated: [String: String] = [
        // libdispatch's workers ask for their QoS's nice value (-4 for user-initiated work); an
        // unprivileged user is refused it anyway (EACCES) and the thread runs at the default.
        "setpriority": "libdispatch's best-effort thread priority"
    ]

    /// The system calls a filter group names, nested groups expanded (`systemd-analyze syscall-filter`).
    static func expand(_ group: String, seen: inout [String: Set<String>]) async throws -> Set<String> {
        if let known = seen[group] { return known }
        let listed = try await RiscBinary.run(["syscall-filter", group], executable: URL(fileURLWithPath: analyze)).stdout
        var names = Set<String>()
        for line in listed.split(separator: "\n").dropFirst() {
            let name = line.trimmingCharacters(in: .whitespaces)
            if name.isEmpty || name.hasPrefix("#") { continue }
            names.formUnion(name.hasPrefix("@") ? try await expand(name, seen: &seen) : [name])
        }
        seen[group] = names
        return names
    }

    @Test("every system call the receiver makes is one the unit's SystemCallFilter allows", .enabled(if: available))
    func tracedReceiver() async throws {
        // The unit's filter: allowed groups, then denied ones (`~`), in its order.
        let unit = try DeployFilesTests.file("deploy/risc.service")
        var seen: [String: Set<String>] = [:], allowed = Set<String>()
        for line in unit.split(separator: "\n") where line.hasPrefix("SystemCallFilter=") {
            let value = line.dropFirst("SystemCallFilter=".count)
            let deny = value.hasPrefix("~")
            for group in value.dropFirst(deny ? 1 : 0).split(separator: " ") {
                let names = try await Self.expand(String(group), seen: &seen)
                if deny { allowed.subtract(names) } else { allowed.formUnion(names) }
            }
        }
        #expect(allowed.contains("read") && !allowed.contains("setrlimit"), "the unit's filter was not read: \(allowed.count) calls")

        let root = Scratch.root.appendingPathComponent("risc-syscalls-\(UUID().uuidString)")
        let data = root.appendingPathComponent("data"), trace = root.appendingPathComponent("trace").path
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: root) }
        // The unit's RestrictAddressFamilies= as a seccomp filter: a socket of another family is
        // refused (EAFNOSUPPORT). glibc's resolver asks for one (AF_NETLINK, which address families
        // this host has, for AI_ADDRCONFIG), is refused, and assumes both: the key set is fetched
        // by name all the same.
        let families = try #require(unit.firstMatch(of: /\nRestrictAddressFamilies=([^\n]*)/)).1
        #expect(families.split(separator: " ").count == 3, "\(families)")
        let filter = RiscBinary.repository.appendingPathComponent("Tests/Tools/restrict-address-families.py").path
        // As the unit's User= (root makes calls no unprivileged user makes: SQLite's fchown).
        var runAs = [Self.python, filter, String(families), "--", Self.strace, "-f", "-qq", "-o", trace]
        if geteuid() == 0 {
            #expect(chown(root.path, 65_534, 65_534) == 0 && chown(data.path, 65_534, 65_534) == 0)
            runAs = ["/usr/sbin/runuser", "-u", "nobody", "--"] + runAs
        }
        let keys = try KeyDirectory.repositoryTestKeys()
        let jwks = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/jwks.json"), encoding: .utf8)
        let issuer = try LocalIssuer(jwks: jwks, issuer: SETFactory.defaultIssuer)
        defer { issuer.server.stop() }
        // By name, as Google's is: the resolver's calls are traced too.
        let discovery = issuer.baseURL.replacingOccurrences(of: "127.0.0.1", with: "localhost") + "/.well-known/risc-configuration"
        let serve = try await ServeCommandTests.startServe(extra: ["--discovery-url", discovery], data: data, pinned: false, runAs: runAs)
        let receiver = try #require(
            ScratchTests.processes(naming: data.path).first { (try? String(contentsOfFile: "/proc/\($0)/comm", encoding: .utf8))?.hasPrefix("risc") == true })
        let client = CurlHTTPClient()
        let factory = SETFactory(signer: try #require(keys.entry(for: .rs256)).signer)
        for (body, status) in [(try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("1001")), 202), ("garbage", 400)] {
            let answer = try await client.perform(
                HTTPRequest(method: "POST", url: "http://127.0.0.1:\(serve.port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array(body.utf8)))
            #expect(answer.status == status)
        }
        for path in ["/metrics", "/readyz", "/healthz"] { _ = try await client.perform(HTTPRequest(url: "http://127.0.0.1:\(serve.admin)\(path)")) }
        kill(receiver, SIGHUP)
        try await Task.sleep(for: .milliseconds(500))
        kill(receiver, SIGTERM)
        await serve.process.exited()

        let text = try String(contentsOfFile: trace, encoding: .utf8)
        var made = Set<String>()
        for match in text.matches(of: /(?m)^\d+ +(?:<\.\.\. )?([a-z_0-9]+)[( ]/) { made.insert(String(match.1)) }
        #expect(made.contains("accept4") && (made.contains("fdatasync") || made.contains("fsync")), "the trace holds no serving: \(made.sorted())")
        let denied = made.subtracting(allowed).subtracting(Self.tolerated.keys).sorted()
        #expect(denied.isEmpty, "calls the unit's SystemCallFilter denies (EPERM in production): \(denied)")
        // MemoryDenyWriteExecute=yes: systemd refuses a mapping both writable and executable, and
        // making any mapping executable after the fact.
        #expect(unit.contains("\nMemoryDenyWriteExecute=yes"))
        let executable = text.split(separator: "\n").filter {
            $0.contains(/[ ](mmap|mprotect|pkey_mprotect)\(/) && $0.contains("PROT_EXEC")
                && ($0.contains("PROT_WRITE") || !$0.contains(" mmap("))
        }
        #expect(executable.isEmpty, "calls MemoryDenyWriteExecute refuses: \(executable.prefix(3))")
        // ProtectSystem=strict and PrivateTmp=: only the state directory (and /tmp, private) is
        // writable; /proc is not the file system's (a thread's own name, /proc/thread-self/comm).
        let written = Set(
            text.matches(of: /open(?:at)?\((?:AT_FDCWD, )?"([^"]+)", [^)]*O_(?:WRONLY|RDWR|CREAT)/).map { String($0.1) }
                .filter { !$0.hasPrefix(data.path) && !$0.hasPrefix("/tmp/") && $0 != "/dev/null" && !$0.hasPrefix("/proc/thread-self/") })
        #expect(written.isEmpty, "files opened for writing outside the state directory (read-only under ProtectSystem=strict): \(written.sorted())")
    }
}

/// Found: `deploy/nginx-risc.conf` did not load in Debian 12's nginx (1.22): `http2 on;` is a
/// directive of nginx 1.25.1 and later ("unknown directive"), and nothing had run the file.
@Suite("deploy/nginx-risc.conf: Debian's nginx in front of a receiver")
struct NginxProxyTests {
    static let nginx = "/usr/sbin/nginx"

    @Test("nginx accepts the shipped server block; through it a SET gets 202, another path 404, a body over 64 KiB 413", .enabled(if: FileManager.default.isExecutableFile(atPath: nginx)))
    func proxied() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-nginx-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)
        let serve = try await ServeCommandTests.startServe(extra: ["--set", "trusted_proxies=127.0.0.1"])
        defer { serve.process.terminate() }
        let port = try PostgresCluster.freePort()

        // The shipped server block with this machine's certificate and ports, each change required to apply.
        var server = try DeployFilesTests.file("deploy/nginx-risc.conf")
        for (shipped, here) in [
            ("/etc/letsencrypt/live/risc.example.com/fullchain.pem", certificate.certificatePath),
            ("/etc/letsencrypt/live/risc.example.com/privkey.pem", certificate.keyPath),
            ("server 127.0.0.1:8443;", "server 127.0.0.1:\(serve.port);"),
        ] {
            #expect(server.contains(shipped), "the server block no longer holds \(shipped)")
            server = server.replacingOccurrences(of: shipped, with: here)
        }
        let listens = server.matches(of: /(?m)^\s*listen [^;]*443[^;]*;/).map { String($0.0) }
        #expect(listens.count == 2, "\(listens)")
        for (index, line) in listens.enumerated() {
            server = server.replacingOccurrences(of: line, with: index == 0 ? line.replacingOccurrences(of: "443", with: "127.0.0.1:\(port)") : "")
        }
        let temporary = directory.path
        let main = """
            pid \(temporary)/nginx.pid;
            error_log \(temporary)/error.log;
            \(geteuid() == 0 ? "user root root;" : "")
            worker_processes 1;
            events {}
            http {
                access_log off;
                client_body_temp_path \(temporary)/body;
                proxy_temp_path \(temporary)/proxy;
            \(server)
            }
            """
        let configuration = directory.appendingPathComponent("nginx.conf").path
        try main.write(toFile: configuration, atomically: true, encoding: .utf8)
        guard let nginx = try await DeployFilesTests.startProxy(Self.nginx, check: ["-t", "-c", configuration], run: ["-c", configuration, "-g", "daemon off;"])
        else { return }
        // Never waited for here (a cooperative thread held for nginx's graceful stop, which waits
        // out keep-alive connections, stalled the whole suite for a minute): see the end.
        defer { if nginx.isRunning { nginx.signal(SIGKILL) } }
        var client = CurlHTTPClient.patient()
        client.caBundlePath = certificate.certificatePath
        let base = "https://localhost:\(port)"
        #expect(await waitWhile { (try? await client.perform(HTTPRequest(url: base + "/"))) == nil }, "nginx did not answer")
        let factory = SETFactory(signer: try #require(try KeyDirectory.repositoryTestKeys().entry(for: .rs256)).signer)
        func post(_ path: String, _ body: String) async throws -> Int {
            try await client.perform(
                HTTPRequest(method: "POST", url: base + path, headers: [("Content-Type", "application/secevent+jwt")], body: Array(body.utf8))
            ).status
        }
        #expect(try await post("/events", try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("1001"))) == 202)
        #expect(try await post("/events", "garbage") == 400)
        #expect(try await post("/metrics", "x") == 404)
        #expect(try await post("/events", String(repeating: "a", count: 70_000)) == 413)
        nginx.signal(SIGTERM)  // nginx's fast stop
        await nginx.exited()
    }
}

/// Found: deploy/risc.logrotate said "keep every file (no `rotate` limit)", but a block without
/// `rotate` takes logrotate.conf's (`rotate 4` in Debian's and Fedora's): the fifth rotation
/// deleted the log's genesis file, after which a restart signs no checkpoints and `risc log verify`
/// cannot decide. And under Fedora's `dateext` the moved files were not risc's to read at all
/// (see EventLogChainTests' dateext test).
@Suite("deploy/risc.logrotate: Debian's logrotate rotating a running receiver's event log")
struct LogrotateTests {
    static let logrotate = "/usr/sbin/logrotate"

    /// logrotate.conf as Debian 12 and Fedora ship it, their `include /etc/logrotate.d` being the block.
    static let defaults = [
        "debian": "weekly\nrotate 4\ncreate\n",
        "fedora": "weekly\nrotate 4\ncreate\ndateext\n",
    ]

    @Test(
        "the shipped block under a distribution's logrotate.conf: six rotations (compressed) with the receiver reopening on SIGHUP, a restart right after one; log verify --key reads the chain whole from its genesis",
        .enabled(if: FileManager.default.isExecutableFile(atPath: logrotate)), arguments: ["debian", "fedora"]
    )
    func rotated(distribution: String) async throws {
        let directory = Scratch.root.appendingPathComponent("risc-logrotate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appendingPathComponent("data")
        let log = data.appendingPathComponent("events.log").path
        let pidFile = directory.appendingPathComponent("risc.pid").path

        // The shipped block, uncommented, with this machine's paths, user and signal.
        let shipped = try DeployFilesTests.file("deploy/risc.logrotate").split(separator: "\n").map(String.init)
        let start = try #require(shipped.firstIndex { $0.hasPrefix("# /var/lib/risc/events.log {") })
        let end = try #require(shipped[start...].firstIndex { $0 == "# }" })
        var block = shipped[start...end].map { String($0.dropFirst(2)) }.joined(separator: "\n") + "\n"
        let user = String(cString: getpwuid(geteuid())!.pointee.pw_name), group = String(cString: getgrgid(getegid())!.pointee.gr_name)
        for (from, to) in [
            ("/var/lib/risc", data.path), ("su risc risc", "su \(user) \(group)"), ("create 0600 risc risc", "create 0600 \(user) \(group)"),
            ("systemctl kill --signal=HUP --kill-whom=main risc.service", "kill -HUP $(cat \(pidFile))"),
        ] {
            #expect(block.contains(from), "the block no longer holds \(from)")
            block = block.replacingOccurrences(of: from, with: to)
        }
        let configuration = directory.appendingPathComponent("logrotate.conf").path
        try (Self.defaults[distribution]! + block).write(toFile: configuration, atomically: true, encoding: .utf8)
        let state = directory.appendingPathComponent("logrotate.state").path

        let keyFile = directory.appendingPathComponent("checkpoint.key").path
        #expect(try await RiscBinary.run(["keys", "checkpoint-key", "--out", keyFile, "--name", "node-r"]).status == 0)
        let extra = ["--set", "event_log_id=node-r", "--set", "event_log_checkpoint_key=\(keyFile)"]
        let factory = SETFactory(signer: try #require(try KeyDirectory.repositoryTestKeys().entry(for: .rs256)).signer)
        var serve = try await ServeCommandTests.startServe(extra: extra, data: data)
        defer { serve.process.terminate() }
        try "\(serve.process.processIdentifier)".write(toFile: pidFile, atomically: true, encoding: .utf8)
        var rotatedAt = 0
        func rotate() async throws {
            // dateext names a file by the second at most: one rotation a second, by logrotate's
            // time(), which is the kernel's coarse clock (a tick behind the one Date reads).
            _ = await waitWhile(upTo: 3) { Date().timeIntervalSince1970 < Double(rotatedAt + 1) + 0.05 }
            let result = try await RiscBinary.run(["-f", "-s", state, configuration], executable: URL(fileURLWithPath: Self.logrotate))
            rotatedAt = Int(Date().timeIntervalSince1970)  // at or after the second logrotate named its file by
            #expect(result.status == 0, "\(result.stderr)")
        }
        for round in 1...6 {
            let set = try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("\(round)"))
            let answer = try await CurlHTTPClient.patient().perform(
                HTTPRequest(method: "POST", url: "http://127.0.0.1:\(serve.port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array(set.utf8)))
            #expect(answer.status == 202)
            try await rotate()
            // Reopened on SIGHUP: its reload line is the new file's first.
            #expect(await waitWhile { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").isEmpty }, "round \(round): no line in the new file")
        }
        serve.process.terminate()
        await serve.process.exited()
        try await rotate()  // the stop's lines moved away; the receiver is not there to signal
        serve = try await ServeCommandTests.startServe(extra: extra, data: data)
        serve.process.terminate()
        await serve.process.exited()

        let files = try FileManager.default.contentsOfDirectory(atPath: data.path).filter { $0.hasPrefix("events.log") }
        #expect(files.count == 8 && files.filter { $0.hasSuffix(".gz") }.count == 6, "\(files.sorted())")
        let verified = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", keyFile + ".pub"])
        #expect(verified.status == 0 && verified.stdout.contains("in 8 files"), "\(verified.stdout) \(verified.stderr)")
    }
}
