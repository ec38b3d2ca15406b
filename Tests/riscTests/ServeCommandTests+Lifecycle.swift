import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

extension ServeCommandTests {
    /// Issue 26 §9: SIGHUP left the log level, limits, retention and the action table as they
    /// were at the start; nothing said what was reloaded.
    @Test("SIGHUP reloads the config file's log level and limits, names what waits for a restart, and refuses a broken file keeping the running settings")
    func reloadsConfiguration() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-reload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("risc.toml").path, stderr = directory.appendingPathComponent("stderr").path
        try "max_body_bytes = 65536\n".write(toFile: file, atomically: true, encoding: .utf8)
        let (process, data, port, _) = try await Self.startServe(extra: ["--config", file], data: directory.appendingPathComponent("data"), stderr: stderr)
        defer { process.terminate() }
        let junk = Array(repeating: UInt8(ascii: "x"), count: 3_000)
        func post() async throws -> Int {
            try await CurlHTTPClient.patient().perform(
                HTTPRequest(method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: junk)
            ).status
        }
        func events() -> String { (try? String(contentsOf: data.appendingPathComponent("events.log"), encoding: .utf8)) ?? "" }
        func hangup(until line: String) async throws {
            process.signal(SIGHUP)
            _ = await waitWhile { !events().contains(line) }
            #expect(events().contains(line), "\(events())")
        }
        #expect(try await post() == 400)

        try "max_body_bytes = 2048\nevents_path = \"/other\"\n[log]\nlevel = \"warning\"\n".write(toFile: file, atomically: true, encoding: .utf8)
        try await hangup(until: #""step":"config","outcome":"reloaded""#)
        #expect(events().contains(#""changed":["max_body_bytes","log.level"]"#) || events().contains(#""changed":["log.level","max_body_bytes"]"#), "\(events())")
        #expect(events().contains(#""restart_needed":["events_path"]"#), "\(events())")
        #expect(try await post() == 413)

        try "max_body_bytes = 10\n[log]\nlevel = \"debug\"\n".write(toFile: file, atomically: true, encoding: .utf8)
        try await hangup(until: #""step":"config","outcome":"refused""#)
        #expect(try await post() == 413)
        // Found by scripts/fuzz (FuzzFiles): a header left open ('[' alone on a line) failed an
        // assertion of the TOML parser's, and the SIGHUP killed the receiver.
        try "max_body_bytes = 4096\n[\n".write(toFile: file, atomically: true, encoding: .utf8)
        process.signal(SIGHUP)
        let refused = #""step":"config","outcome":"refused""#
        _ = await waitWhile { events().components(separatedBy: refused).count < 3 }
        #expect(events().components(separatedBy: refused).count == 3, "\(events())")
        #expect(try await post() == 413)
        process.terminate()
        await process.exited()
        let diagnostics = try String(contentsOfFile: stderr, encoding: .utf8)
        #expect(diagnostics.contains("configuration reloaded (SIGHUP)"), "\(diagnostics)")
        #expect(diagnostics.contains("take effect only at the next start"), "\(diagnostics)")
        #expect(diagnostics.contains("configuration not reloaded (SIGHUP): still running on the previous one"), "\(diagnostics)")
        #expect(diagnostics.contains("max_body_bytes must be 1 KiB–1 MiB"), "\(diagnostics)")
        #expect(diagnostics.contains("a table header names a table"), "\(diagnostics)")
        // The first SIGHUP's notice is there; after it the level is warning, so the second's is not.
        #expect(diagnostics.components(separatedBy: "event log reopened (SIGHUP)").count == 2, "\(diagnostics)")
    }
}

/// A Unix datagram socket standing in for systemd's `NOTIFY_SOCKET`.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init() throws {
        path = Scratch.root.appendingPathComponent("risc-notify-\(UUID().uuidString.prefix(8))").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(fd >= 0 && bound == 0)
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next datagram, or nil after 15 s.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    deinit {
        close(fd)
        unlink(path)
    }
}

extension ServeCommandTests {
    /// Issue 16: the diagnostic log was plain text with whole seconds, silent at start and stop at
    /// the default level; no readiness for systemd; invalid_audience did not name the aud.
    @Test("JSON diagnostics with microsecond times; start, ready, stopping, stopped at the default level; READY=1 and STOPPING=1; invalid_audience names the aud")
    func lifecycleLogging() async throws {
        let notify = try NotifySocket()
        let data = Scratch.root.appendingPathComponent("risc-lifecycle-\(UUID().uuidString)")
        let stderrFile = data.path + ".stderr"
        _ = FileManager.default.createFile(atPath: stderrFile, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: data)
            try? FileManager.default.removeItem(atPath: stderrFile)
        }
        let process = ChildProcess()
        process.executableURL = RiscBinary.url
        process.currentDirectoryURL = RiscBinary.repository
        process.arguments = [
            "serve", "--audience", SETFactory.defaultAudience, "--jwks-file", "keys/test/jwks.json", "--issuer", SETFactory.defaultIssuer,
            "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--data-dir", data.path, "--set", "log.format=json",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": notify.path]) { $1 }
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrFile))
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let ready = notify.receive()
        try #require(ready?.hasPrefix("READY=1") == true, "\(ready ?? "nothing")")
        // Its `risc ready` line, written before READY=1, names the ports it bound.
        let (port, admin) = try #require(Self.readyPorts(try String(contentsOfFile: stderrFile, encoding: .utf8)))
        // Ready means listening: a request right away is answered.
        let client = CurlHTTPClient.patient()
        #expect(try await client.perform(HTTPRequest(url: "http://127.0.0.1:\(admin)/healthz")).status == 200)
        let foreign = try await RiscBinary.run(["sign", "--aud", "someone-elses-client.apps.googleusercontent.com"]).stdout
        let refused = try await client.perform(
            HTTPRequest(
                method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(foreign.trimmingCharacters(in: .whitespacesAndNewlines).utf8)))
        #expect(refused.status == 400 && !String(decoding: refused.body, as: UTF8.self).contains("someone-elses"))  // nothing of the token echoed
        process.terminate()
        #expect(notify.receive() == "STOPPING=1")
        await process.exited()
        #expect(process.terminationStatus == 0)
        let log = try String(contentsOfFile: data.appendingPathComponent("events.log").path, encoding: .utf8)
        #expect(log.contains("invalid_audience") && log.contains(#""aud":["someone-elses-client.apps.googleusercontent.com"]"#), "\(log)")
        let lines = try String(contentsOfFile: stderrFile, encoding: .utf8).split(separator: "\n")
        let objects = lines.compactMap { try? JSONParser.parseObject(Array($0.utf8)) }
        #expect(objects.count == lines.count && !lines.isEmpty, "every line is a JSON object: \(lines)")
        let messages = objects.compactMap { $0["message"]?.stringValue }
        for expected in ["risc starting", "risc ready", "risc stopping", "risc stopped"] {
            #expect(messages.contains { $0.hasPrefix(expected) }, "\(expected) in \(messages)")
        }
        let times = objects.compactMap { $0["ts"]?.stringValue }
        #expect(times.allSatisfy { $0.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"#, options: .regularExpression) != nil }, "\(times)")
        #expect(objects.first { $0["message"] == "risc starting" }?["risc.version"]?.stringValue?.contains("commit") == true)
        // Issue 26 §10: numbers and booleans arrive as such, not as strings.
        let starting = objects.first { $0["message"] == "risc starting" }
        #expect(starting?["risc.pid"] == .number(Double(process.processIdentifier)) && starting?["risc.tls"] == false, "\(String(describing: starting))")
    }

    @Test("log.level from the configuration quiets the start lines; --log-level wins over it; a bad level is a configuration error")
    func logLevelSetting() async throws {
        let base = ["serve", "--audience", "a", "--jwks-file", "keys/test/jwks.json", "--check-config"]
        let bad = try await RiscBinary.run(base + ["--set", "log.level=chatty"])
        #expect(bad.status == 64 && bad.stderr.contains("log.level must be one of"), "\(bad.stderr)")
        let badFormat = try await RiscBinary.run(base, environment: ["RISC_LOG_FORMAT": "xml"])
        #expect(badFormat.status == 64 && badFormat.stderr.contains("log.format must be text or json"), "\(badFormat.stderr)")
    }
}

extension ServeCommandTests {
    @Test("--version names the commit; shell completions for bash, zsh and fish come from the argument parser and know every command")
    func versionAndCompletions() async throws {
        let version = try await RiscBinary.run(["--version"])
        #expect(version.status == 0 && version.stdout.range(of: #"^0\.1\.0 \(commit [0-9a-zA-Z._+-]+\)"#, options: .regularExpression) != nil, "\(version.stdout)")
        for shell in ["bash", "zsh", "fish"] {
            let script = try await RiscBinary.run(["--generate-completion-script", shell])
            #expect(script.status == 0, "\(shell): \(script.stderr)")
            for command in ["serve", "accounts", "queue", "replay", "tail", "stream", "linking", "keys"] {
                #expect(script.stdout.contains(command), "\(shell) completion names \(command)")
            }
        }
    }
}

extension ServeCommandTests {
    @Test("scripts/man writes the man page with the argument parser's generate-manual: clean mdoc (groff warns of nothing), every command and the configuration keys in it")
    func manPage() async throws {
        let output = Scratch.root.appendingPathComponent("risc-man-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let script = RiscBinary.repository.appendingPathComponent("scripts/man")
        let made = try await RiscBinary.run([RiscBinary.url.path, output.path, "2026-11-24"], executable: script)
        #expect(made.status == 0, "\(made.stderr.suffix(2000))")
        let page = output.appendingPathComponent("risc.1")
        let text = try String(contentsOf: page, encoding: .utf8)
        #expect(text.hasPrefix(#".\" "Generated by swift-argument-parser""#) && text.contains(".Dd November 24, 2026") && text.contains(".Dt RISC 1"))
        let lint = try await RiscBinary.run(["-mandoc", "-ww", "-z", "-Tutf8", page.path], executable: URL(fileURLWithPath: "/usr/bin/groff"))
        #expect(lint.status == 0 && lint.stderr.isEmpty, "groff: \(lint.stderr)")
        for command in ["serve", "accounts", "queue", "replay", "tail", "stream", "linking", "keys", "store"] {
            #expect(text.contains(".It Em \(command)\n"), "the page documents risc \(command)")
        }
        for detail in ["check-config", "RISC_LISTEN_PORT", "actions.retry_window", "--data-dir"] {
            #expect(text.contains(detail), "the page mentions \(detail)")
        }
        // Issue 26 §10: the page had no FILES, SIGNALS nor ENVIRONMENT, and a generic exit status.
        for section in ["ENVIRONMENT", "FILES", "SIGNALS", "EXIT STATUS"] {
            #expect(text.components(separatedBy: "\n.Sh \(section)\n").count == 2, "one \(section) section")
        }
        for detail in ["Pa DATA_DIR/events.log", "Dv SIGHUP", "Ev GOOGLE_APPLICATION_CREDENTIALS", ".It 64", ".It 69"] {
            #expect(text.contains(detail), "the page mentions \(detail)")
        }
        #expect(!text.contains(".Ex -std"), "the generic exit status is replaced")
    }
}
