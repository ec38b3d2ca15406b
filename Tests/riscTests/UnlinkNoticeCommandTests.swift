import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Synchronization
import Testing

/// Issue 15 §3 as an operator runs it: `risc keys rotate`, `risc serve` with `linking.notices.*`,
/// `risc linking revoke`, `risc queue`; queued notices survive a SIGKILL of the receiver.
@Suite("risc linking revoke: unlink notices from the command line", .serialized)
struct UnlinkNoticeCommandTests {
    static let issuer = "https://site.example/risc"

    @Test("notices queued by the CLI survive kill -9 while Google fails, and are published once each after the restart")
    func survivesKill() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-notice-cli-\(UUID().uuidString)")
        let keyDirectory = directory.appendingPathComponent("notice-keys").path
        let rotated = try await RiscBinary.run(["keys", "rotate", "--dir", keyDirectory])
        try #require(rotated.status == 0, "\(rotated.stderr)")
        let account = try TestServiceAccount(directory: directory)
        let google = try FakeRISCAPI.forNotices(account: account, noticeIssuer: Self.issuer)
        defer { google.stop() }
        google.state.withLock { $0.failPublishes = 1_000_000 }
        let data = directory.appendingPathComponent("data")
        let config = directory.appendingPathComponent("risc.json").path
        let settings: JSONValue = [
            "data_dir": .string(data.path), "audiences": [.string(SETFactory.defaultAudience)],
            "linking": [
                "notices": [
                    "issuer": .string(Self.issuer), "key_dir": .string(keyDirectory), "service_account_file": .string(account.path),
                    "endpoint": .string(google.baseURL + "/v1/events:publish"),
                ]
            ],
            "actions": ["base_delay": 0.05, "max_delay": 0.3, "max_attempts": 1_000],
        ]
        try Data(settings.prettyPrinted.utf8).write(to: URL(fileURLWithPath: config))

        let tokens = (1...3).map { "cli-linked-token-\($0)" }
        for (index, token) in tokens.enumerated() {
            try Data(token.utf8).write(to: directory.appendingPathComponent("linked-\(index)"))
        }
        let linked = try await RiscBinary.run(
            ["accounts", "link", "--config", config, "--subject", "erin", "--user", "u-erin", "--create"]
                + tokens.indices.flatMap { ["--linked-token-file", directory.appendingPathComponent("linked-\($0)").path] })
        try #require(linked.status == 0, "\(linked.stderr)")

        var serve = try await ServeCommandTests.startServe(extra: ["--config", config], data: data)
        defer { if serve.process.isRunning { serve.process.terminate() } }  // a failed expectation leaves no receiver behind
        google.state.withLock { $0.noticeOrigin = "http://127.0.0.1:\(serve.port)" }
        // Two tokens named on standard input, then the rest of the account's.
        let some = try await RiscBinary.run(["linking", "revoke", "erin", "--config", config, "--token-stdin"], stdin: tokens[0] + "\n" + tokens[1] + "\n")
        try #require(some.status == 0, "\(some.stderr)")
        let first = try JSONParser.parseObject(Array(some.stdout.utf8))
        #expect(first["revoked"]?.numberValue == 2)
        #expect(first["notices_queued"]?.numberValue == 2)
        let rest = try await RiscBinary.run(["linking", "revoke", "erin", "--config", config])
        #expect(try JSONParser.parseObject(Array(rest.stdout.utf8))["notices_queued"]?.numberValue == 1)
        #expect(try await RiscBinary.run(["linking", "revoke", "nobody", "--config", config]).status == 1)

        // Google fails them for a while, then the receiver dies without a chance to clean up.
        _ = await waitWhile { google.state.withLock({ $0.publishFailures }) < 6 }
        #expect(google.state.withLock { $0.publishFailures } >= 6)
        serve.process.signal(SIGKILL)
        await serve.process.exited()
        let queued = try JSONParser.parseObject(Array(try await RiscBinary.run(["queue", "status", "--config", config]).stdout.utf8))
        #expect((queued["pending"]?.numberValue ?? 0) + (queued["scheduled_retry"]?.numberValue ?? 0) == 3)
        #expect((queued["scheduled_retry"]?.numberValue ?? 0) >= 1)
        #expect(queued["dead"]?.numberValue == 0)

        google.state.withLock { $0.failPublishes = 0 }
        serve = try await ServeCommandTests.startServe(extra: ["--config", config], data: data)
        google.state.withLock { $0.noticeOrigin = "http://127.0.0.1:\(serve.port)" }
        _ = await waitWhile { google.state.withLock({ $0.notices.count }) < 3 }
        let notices = google.state.withLock { $0.notices }
        #expect(notices.count == 3, "refusals: \(google.state.withLock { $0.noticeRefusals })")
        let expected = Set(tokens.map { token in SHA512.hash(SHA512.hash(Array(token.utf8))).map { String(format: "%02x", $0) }.joined() })
        let sent = notices.compactMap { $0["events"]?.objectValue?[EventType.tokenRevoked.uri]?.objectValue?["token"]?.stringValue }
        #expect(Set(sent) == expected)
        #expect(sent.count == 3)
        try await Task.sleep(for: .milliseconds(300))
        #expect(google.state.withLock { $0.notices.count } == 3)
        serve.process.terminate()
        await serve.process.exited()
        let done = try JSONParser.parseObject(Array(try await RiscBinary.run(["queue", "status", "--config", config]).stdout.utf8))
        #expect(done["done"]?.numberValue == 3)
        let log = (try? String(contentsOf: data.appendingPathComponent("events.log"), encoding: .utf8)) ?? ""
        #expect(!tokens.contains { log.contains($0) })
    }

    /// Watches `directory` with inotify and records the mode of every file as it appears there
    /// (created or renamed in), as a local user racing the writer would see it.
    final class ModeWatcher: @unchecked Sendable {
        let fd: Int32
        let directory: String
        private let seen = Mutex<[(name: String, mode: mode_t)]>([])
        private let stopping = Atomic<Bool>(false)
        private let done = DispatchSemaphore(value: 0)

        init(_ directory: String) throws {
            self.directory = directory
            fd = inotify_init1(Int32(IN_NONBLOCK))
            guard fd >= 0, inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE)) >= 0 else { throw POSIXError(.EIO) }
            Thread.detachNewThread { [self] in loop() }
        }

        private func loop() {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while !stopping.load(ordering: .relaxed) {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 20) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard count > 0 else { continue }
                var offset = 0
                while offset + 16 <= count {
                    let length = Int(buffer[offset + 12]) | Int(buffer[offset + 13]) << 8 | Int(buffer[offset + 14]) << 16 | Int(buffer[offset + 15]) << 24
                    let nameBytes = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                    let name = String(decoding: nameBytes, as: UTF8.self)
                    var status = stat()
                    if !name.isEmpty, lstat(directory + "/" + name, &status) == 0 {
                        seen.withLock { $0.append((name, status.st_mode & 0o777)) }
                    }
                    offset += 16 + length
                }
            }
            done.signal()
        }

        func stop() -> [(name: String, mode: mode_t)] {
            stopping.store(true, ordering: .relaxed)
            done.wait()
            close(fd)
            return seen.withLock { $0 }
        }
    }

    @Test("issue 24 #2: keys generate and rotate write private keys 0600 from the first byte (never readable by others while written), in a new directory 0700")
    func privateKeysNeverReadable() async throws {
        let base = Scratch.root.appendingPathComponent("risc-keymode-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        // New directories are 0700.
        for command in ["rotate", "generate"] {
            let fresh = base.appendingPathComponent("new-\(command)").path
            #expect(try await RiscBinary.run(["keys", command, "--dir", fresh]).status == 0)
            var status = stat()
            #expect(stat(fresh, &status) == 0 && status.st_mode & 0o777 == 0o700, "\(command) made \(fresh) mode \(String(status.st_mode & 0o777, radix: 8))")
        }
        // An existing, ordinary (0755) directory: every file that appears in it while keys are
        // written is private from the first moment it can be seen.
        let watched = base.appendingPathComponent("watched").path
        try FileManager.default.createDirectory(atPath: watched, withIntermediateDirectories: true)
        let watcher = try ModeWatcher(watched)
        for round in 0..<6 {
            #expect(try await RiscBinary.run(["keys", round % 2 == 0 ? "rotate" : "generate", "--dir", watched]).status == 0)
        }
        let seen = watcher.stop()
        let keys = try FileManager.default.contentsOfDirectory(atPath: watched).filter { $0.hasSuffix(".pem") }
        #expect(keys.count == 6)
        #expect(!seen.isEmpty, "the watcher saw nothing")
        let exposed = seen.filter { $0.mode & 0o077 != 0 && !$0.name.hasSuffix("jwks.json") && $0.name != "active" }
        #expect(exposed.isEmpty, "files readable by others while keys were written: \(exposed.map { "\($0.name) \(String($0.mode, radix: 8))" })")
        for key in keys {
            var status = stat()
            #expect(stat(watched + "/" + key, &status) == 0 && status.st_mode & 0o777 == 0o600)
        }
    }

    @Test("risc keys rotate, activate, retire: the signing key changes, the active one cannot be retired; bad input exits 64")
    func keys() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-notice-keys-\(UUID().uuidString)").path
        #expect(try await RiscBinary.run(["keys", "rotate", "--dir", directory]).status == 0)
        let first = try TransmitterKeys(directory: directory).signer.keyID ?? ""
        #expect(try await RiscBinary.run(["keys", "rotate", "--dir", directory, "--alg", "ES256"]).status == 0)
        let second = try TransmitterKeys(directory: directory)
        #expect(second.keyIDs.count == 2 && second.signer.keyID != first && second.signer.algorithm == .es256)
        #expect(try await RiscBinary.run(["keys", "retire", "--dir", directory, "--kid", second.signer.keyID ?? ""]).status == 64)
        #expect(try await RiscBinary.run(["keys", "activate", "--dir", directory, "--kid", first]).status == 0)
        #expect(try TransmitterKeys(directory: directory).signer.keyID == first)
        #expect(try await RiscBinary.run(["keys", "retire", "--dir", directory, "--kid", second.signer.keyID ?? ""]).status == 0)
        #expect(try TransmitterKeys(directory: directory).keyIDs == [first])
        #expect(!FileManager.default.fileExists(atPath: directory + "/\(second.signer.keyID ?? "").pem"))
        #expect(try await RiscBinary.run(["keys", "activate", "--dir", directory, "--kid", "nope"]).status == 64)
        #expect(try await RiscBinary.run(["keys", "rotate", "--dir", directory, "--alg", "HS256"]).status == 64)
        #expect(try await RiscBinary.run(["linking", "revoke", "x", "--token-hash", "zz"]).status == 64)
    }

    /// Found: a problem a command finds as it runs (the key it names is not there) printed the
    /// whole program's usage line, `Usage: risc <subcommand>`, which says nothing of it; and `keys
    /// generate --kid ../evil` exited 1, not 64. A problem with the arguments' own syntax still
    /// shows the command's usage.
    static let keyIDRule = "a key ID is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'"

    @Test("a problem found while a command runs is told without usage text, exit 64; the arguments' own errors keep their usage")
    func runProblemsWithoutUsage() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-notice-keys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await RiscBinary.run(["keys", "rotate", "--dir", directory]).status == 0)
        let signing = try TransmitterKeys(directory: directory).signer.keyID ?? ""
        for (arguments, expected) in [
            (["keys", "activate", "--dir", directory, "--kid", "nope"], "no published key nope"),
            (["keys", "retire", "--dir", directory, "--kid", signing], "\(signing) is the signing key; activate another first"),
            (["keys", "generate", "--dir", directory, "--kid", "../evil"], Self.keyIDRule),
            // Found: a kid with a space or a control character was taken, for a file name and for
            // the key set published to Google, and echoed to the terminal as it was.
            (["keys", "generate", "--dir", directory, "--kid", "a b"], Self.keyIDRule),
            (["keys", "generate", "--dir", directory, "--kid", "x\u{1B}[2J"], Self.keyIDRule),
            (["keys", "generate", "--dir", directory, "--kid", String(repeating: "k", count: 129)], Self.keyIDRule),
            (["keys", "generate", "--dir", directory, "--kid", signing], "already"),
        ] {
            let result = try await RiscBinary.run(arguments)
            #expect(
                result.status == 64 && result.stderr.contains(expected) && !result.stderr.contains("Usage:"),
                "\(arguments.prefix(2)): \(result.status) \(result.stderr)")
        }
        let syntax = try await RiscBinary.run(["keys", "generate", "--dir", directory, "--alg", "HS999"])
        #expect(syntax.status == 64 && syntax.stderr.contains("Usage: risc keys generate"), "\(syntax.stderr)")
        // Found: the refusal named three algorithms while the command makes keys for every one risc verifies.
        #expect(syntax.stderr.contains("RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519"), "\(syntax.stderr)")
        #expect(try await RiscBinary.run(["keys", "generate", "--dir", directory, "--kid", "k-1.a_B", "--alg", "ES384"]).status == 0)
    }

    @Test("serve --check-config refuses notices without keys or service account, and a bad issuer")
    func configuration() async throws {
        let missing = try await RiscBinary.run([
            "serve", "--check-config", "--audience", "a", "--jwks-file", "keys/test/jwks.json", "--set", "linking.notices.issuer=https://site.example/risc",
        ])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("linking.notices.key_dir"))
        #expect(missing.stderr.contains("linking.notices.service_account_file"))
        let bad = try await RiscBinary.run([
            "serve", "--check-config", "--audience", "a", "--jwks-file", "keys/test/jwks.json", "--set", "linking.notices.issuer=http://site.example/risc/",
            "--set", "linking.notices.body=xml",
        ])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("linking.notices.issuer: plain HTTP"))
        #expect(bad.stderr.contains("must not end with '/'"))
        #expect(bad.stderr.contains("linking.notices.body must be json or secevent+jwt"))
    }
}
