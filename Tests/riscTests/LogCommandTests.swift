import Foundation
import RISCClient
import RISCCore
import RISCLocal
import RISCTestKit
import Synchronization
import Testing

/// `risc log verify` (issue 28): its exit statuses and what it prints, on a log risc wrote.
@Suite("risc log verify")
struct LogCommandTests {
    @Test("a whole chain: exit 2 (no checkpoint to rule out a cut end), named as whole; an edited line: exit 1 naming the line and why")
    func verify() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-logcmd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/events.log"
        let log = try JSONLinesEventLog(path: path, logID: "node-b")
        for index in 0..<4 {
            var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_700_000_000)
            record["jti"] = .string("jti-\(index)")
            log.record(record)
        }
        log.close()

        var result = try await RiscBinary.run(["log", "verify", "--data-dir", directory])
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("chain whole: 5 lines, seq 0–4, in 1 file, log node-b"), "\(result.stdout)")
        #expect(result.stdout.contains("undecided: no verifier key"))
        result = try await RiscBinary.run(["log", "verify", "--json", path])
        let object = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(result.status == 2 && object["result"] == "undecided" && object["last_seq"] == 4)
        // Found: each file was read whole (a 132 MB log peaked at 169 MB), so a large log needed
        // its size in memory, the receiver's own start too (it rebuilds the checkpoint tree with
        // the verifier). Read a chunk at a time, a run of zeros past 1 MiB (a file grown by 1.5
        // GB, sparse) is checked as its first 1 MiB, within a 1.2 GB address-space limit.
        let grown = directory + "/grown.log"
        try FileManager.default.copyItem(atPath: path, toPath: grown)
        let handle = try #require(FileHandle(forWritingAtPath: grown))
        try handle.truncate(atOffset: try handle.seekToEnd() + (1_500 << 20))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\n".utf8))
        try handle.close()
        let limited = try await RiscBinary.run(
            ["-c", "ulimit -v 1200000; exec \(RiscBinary.url.path) log verify \(grown)"], executable: URL(fileURLWithPath: "/bin/sh"))
        try? FileManager.default.removeItem(atPath: grown)
        #expect(limited.status == 1 && limited.stdout.contains("TAMPERED: bad_json at \(grown):6: not a JSON object"), "\(limited.stdout) \(limited.stderr)")

        let tailed = try await RiscBinary.run(["tail", "--verify", "--file", path, "--json"])
        #expect(tailed.status == 0 && tailed.stdout.hasPrefix("hash chain: whole from seq 0 to 4 (0 torn)"), "\(tailed.stdout)")
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text = text.replacingOccurrences(of: "jti-1", with: "jti-9")
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        result = try await RiscBinary.run(["log", "verify", "--data-dir", directory])
        #expect(result.status == 1)
        #expect(result.stdout.contains("TAMPERED: prev_mismatch at \(path):4 (seq 3)"), "\(result.stdout)")
        let broken = try await RiscBinary.run(["tail", "--verify", "--file", path])
        #expect(broken.stdout.hasPrefix("!! hash chain broken: prev_mismatch at \(path):4 (seq 3)"), "\(broken.stdout)")
        result = try await RiscBinary.run(["log", "verify", "--json", "--data-dir", directory])
        let tampered = try JSONParser.parseObject(Array(result.stdout.utf8))
        #expect(result.status == 1 && tampered["result"] == "tampered" && tampered["problem"]?.objectValue?["reason"] == "prev_mismatch")

        result = try await RiscBinary.run(["log", "verify", "--data-dir", directory + "/nothing"])
        #expect(result.status == 64 && result.stderr.contains("no event log in"))
        // A file given that cannot be read is named, with why (was: "The file doesn't exist.").
        result = try await RiscBinary.run(["log", "verify", directory + "/gone.log"])
        #expect(result.status == 64 && result.stderr.contains("cannot read \(directory)/gone.log: No such file or directory"), "\(result.stderr)")
        try "not gzip".write(toFile: directory + "/old.log.gz", atomically: true, encoding: .utf8)
        result = try await RiscBinary.run(["log", "verify", directory + "/old.log.gz"])
        #expect(result.status == 64 && result.stderr.contains("cannot read \(directory)/old.log.gz: gzip -dc failed: gzip:"), "\(result.stderr)")
    }

    @Test(
        "risc serve signs checkpoints with the key `risc keys checkpoint-key` made, at its interval and at shutdown; the chain goes on over SIGHUP; `risc log verify --key` says VERIFIED, `risc log checkpoint` prints the note"
    )
    func serveCheckpoints() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-logserve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("checkpoint.key").path
        let made = try await RiscBinary.run(["keys", "checkpoint-key", "--out", keyFile, "--name", "node-z"])
        #expect(made.status == 0, "\(made.stderr)")
        let verifierKey = try String(contentsOfFile: keyFile + ".pub", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(made.stdout.contains(verifierKey) && verifierKey.hasPrefix("node-z+"))
        #expect((try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try await RiscBinary.run(["keys", "checkpoint-key", "--out", keyFile]).status == 64)  // never overwritten

        // Each checkpoint is also sent off the box as it is made.
        let received = Mutex<[String]>([])
        let collector = try LoopbackHTTPServer { request in
            received.withLock { $0.append(String(decoding: request.body, as: UTF8.self)) }
            return LoopbackHTTPServer.Response(status: 204)
        }
        defer { collector.stop() }
        let config = directory.appendingPathComponent("risc.toml").path
        try """
        event_log_id = "node-z"
        event_log_checkpoint_key = "\(keyFile)"
        event_log_checkpoint_interval = "1s"
        event_log_checkpoint_url = "http://127.0.0.1:\(collector.port)/checkpoints"

        """.write(toFile: config, atomically: true, encoding: .utf8)
        let data = directory.appendingPathComponent("data")
        let (process, _, port, _) = try await ServeCommandTests.startServe(extra: ["--config", config], data: data)
        defer { process.terminate() }
        let checkpoint = data.appendingPathComponent("events.checkpoint").path
        #expect(await waitWhile { !FileManager.default.fileExists(atPath: checkpoint) })
        let signed = try await RiscBinary.run(["sign"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let accepted = try await CurlHTTPClient.patient().perform(
            HTTPRequest(
                method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array(signed.utf8)))
        #expect(accepted.status == 202)
        process.signal(SIGHUP)
        _ = try await CurlHTTPClient.patient().perform(HTTPRequest(method: "POST", url: "http://127.0.0.1:\(port)/events", body: Array("junk".utf8)))
        process.terminate()
        await process.exited()

        let verified = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", keyFile + ".pub"])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        #expect(verified.stdout.contains("log node-z") && verified.stdout.contains("VERIFIED") && !verified.stdout.contains("tail_unsealed"), "\(verified.stdout)")
        let note = try await RiscBinary.run(["log", "checkpoint", "--data-dir", data.path])
        #expect(note.status == 0 && note.stdout.hasPrefix("risc-event-log/node-z\n") && note.stdout.contains("\u{2014} node-z "), "\(note.stdout)")
        #expect(received.withLock { $0.last } == note.stdout, "the shutdown checkpoint was sent before the exit")
        // Kept elsewhere, the note catches a log cut short later.
        let trusted = directory.appendingPathComponent("trusted.checkpoint").path
        try note.stdout.write(toFile: trusted, atomically: true, encoding: .utf8)
        let log = data.appendingPathComponent("events.log").path
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        try (lines.dropLast().joined(separator: "\n") + "\n").write(toFile: log, atomically: false, encoding: .utf8)
        try FileManager.default.removeItem(atPath: checkpoint)
        let cut = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", verifierKey, "--trusted-checkpoint", trusted])
        #expect(cut.status == 1 && cut.stdout.contains("TAMPERED: truncated"), "\(cut.stdout)")
        // An event's lines proved to an auditor who has only the verifier key (the log as it was).
        try (lines.joined(separator: "\n") + "\n").write(toFile: log, atomically: false, encoding: .utf8)
        try note.stdout.write(toFile: checkpoint, atomically: true, encoding: .utf8)
        let jti = try #require(lines.compactMap { try? JSONParser.parseObject(Array($0.utf8)) }.first { $0["jti"] != nil }?["jti"]?.stringValue)
        let proof = try await RiscBinary.run(["log", "prove", "--data-dir", data.path, "--jti", jti])
        #expect(proof.status == 0, "\(proof.stderr)")
        let proofFile = directory.appendingPathComponent("proof.json").path
        try proof.stdout.write(toFile: proofFile, atomically: true, encoding: .utf8)
        let proved = try await RiscBinary.run(["log", "check-proof", proofFile, "--key", keyFile + ".pub"])
        #expect(proved.status == 0 && proved.stdout.hasPrefix("PROVED: "), "\(proved.stdout)")
        // Found: a proof, key or trusted checkpoint saved again by an editor that writes a byte-order
        // mark (Windows' Notepad) was "not a verifier key" / not JSON / "cannot read": the mark is no part of them.
        let markedProof = proofFile + ".bom", markedKey = keyFile + ".pub.bom", markedTrusted = trusted + ".bom"
        for (from, to) in [(proofFile, markedProof), (keyFile + ".pub", markedKey), (trusted, markedTrusted)] {
            try Data([0xEF, 0xBB, 0xBF] + Array(try Data(contentsOf: URL(fileURLWithPath: from)))).write(to: URL(fileURLWithPath: to))
        }
        let markedProved = try await RiscBinary.run(["log", "check-proof", markedProof, "--key", markedKey])
        #expect(markedProved.status == 0 && markedProved.stdout.hasPrefix("PROVED: "), "\(markedProved.stdout) \(markedProved.stderr)")
        let markedVerified = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", markedKey, "--trusted-checkpoint", markedTrusted])
        #expect(markedVerified.status == 0 && markedVerified.stdout.contains("VERIFIED"), "\(markedVerified.stdout) \(markedVerified.stderr)")
        // Found: a proof piped in (`/dev/stdin`) was "cannot read", and a key file that could not be
        // read was "not a verifier key"; each now reads, or says why it cannot.
        let piped = try await RiscBinary.run(["log", "check-proof", "/dev/stdin", "--key", keyFile + ".pub"], stdin: proof.stdout)
        #expect(piped.status == 0 && piped.stdout.hasPrefix("PROVED: "), "\(piped.stdout) \(piped.stderr)")
        let noKey = try await RiscBinary.run(["log", "check-proof", proofFile, "--key", directory.path + "/missing.pub"])
        #expect(noKey.stderr.contains("cannot read \(directory.path)/missing.pub: No such file or directory"), "\(noKey.stderr)")
        let noProof = try await RiscBinary.run(["log", "check-proof", directory.path + "/missing.json", "--key", keyFile + ".pub"])
        #expect(noProof.stderr.contains("cannot read \(directory.path)/missing.json: No such file or directory"), "\(noProof.stderr)")
        try proof.stdout.replacingOccurrences(of: "received", with: "rejected").write(toFile: proofFile, atomically: true, encoding: .utf8)
        let forged = try await RiscBinary.run(["log", "check-proof", proofFile, "--key", keyFile + ".pub"])
        #expect(forged.status == 1 && forged.stdout.hasPrefix("NOT PROVED: "), "\(forged.stdout)")
    }

    @Test("risc serve rotating by size: segments with signed digests as it serves; log verify 0; a segment deleted: 1, segment_missing")
    func servesSegments() async throws {
        let directory = Scratch.root.appendingPathComponent("risc-segments-cmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("checkpoint.key").path
        #expect(try await RiscBinary.run(["keys", "checkpoint-key", "--out", keyFile, "--name", "node-s"]).status == 0)
        let config = directory.appendingPathComponent("risc.toml").path
        try """
        event_log_id = "node-s"
        event_log_checkpoint_key = "\(keyFile)"
        event_log_rotate_bytes = 4096

        """.write(toFile: config, atomically: true, encoding: .utf8)
        let data = directory.appendingPathComponent("data")
        let (process, _, port, _) = try await ServeCommandTests.startServe(extra: ["--config", config], data: data)
        defer { process.terminate() }
        let keys = try KeyDirectory.repositoryTestKeys()
        let factory = SETFactory(signer: keys.entry(for: .rs256)!.signer)
        let client = CurlHTTPClient.patient()
        for index in 0..<40 {
            let token = try factory.make(type: .sessionsRevoked, subject: factory.accountSubject("seg-\(index)"), jti: "seg-\(index)")
            let answer = try await client.perform(
                HTTPRequest(
                    method: "POST", url: "http://127.0.0.1:\(port)/events", headers: [("Content-Type", "application/secevent+jwt")], body: Array(token.utf8)))
            #expect(answer.status == 202)
        }
        process.terminate()
        await process.exited()
        let found = EventLogSegments.discover(data.appendingPathComponent("events.log").path)
        #expect(found.count >= 2 && found.values.allSatisfy { $0.log != nil && $0.digest != nil }, "\(found)")
        let verified = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", keyFile + ".pub"])
        #expect(verified.status == 0 && verified.stdout.contains("VERIFIED"), "\(verified.stdout) \(verified.stderr)")
        try FileManager.default.removeItem(atPath: try #require(found[1]?.log))
        let missing = try await RiscBinary.run(["log", "verify", "--data-dir", data.path, "--key", keyFile + ".pub", "--json"])
        #expect(missing.status == 1 && missing.stdout.contains("segment_missing"), "\(missing.stdout) \(missing.stderr)")
    }
}

extension LogCommandTests {
    /// Found: `risc log prove` held a hash of every line of the log and hashed the lines again for
    /// each line it proved (a 705 MB log of 2.6 million lines, an event of 26 lines: 22.7 s, 345 MB;
    /// a year of logs would not fit in memory). It now reads the log twice, finding the event's lines,
    /// then hashing each node of the tree the proofs need once, with the memory of a few paths.
    @Test("log prove reads the log a chunk at a time: an event's lines in a log of 300,000 proved within a few MB of a small log's peak")
    func proveInBoundedMemory() async throws {
        let key = try CheckpointKey.generate(name: "node-p").key
        func logOf(_ lines: Int) throws -> URL {
            let data = Scratch.root.appendingPathComponent("risc-prove-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            let log = try JSONLinesEventLog(path: data.appendingPathComponent("events.log").path, logID: "node-p", checkpoints: .init(key: key, interval: 60))
            for index in 0..<lines {
                var record = EventLogRecord(step: .received, outcome: .accepted, time: 1_800_000_000)
                record["jti"] = .string(index % 50_000 == 7 ? "proved" : "jti-\(index)")
                log.record(record)
            }
            log.close()
            return data
        }
        let (large, small) = (try logOf(300_000), try logOf(100))
        defer { for data in [large, small] { try? FileManager.default.removeItem(at: data) } }
        let output = large.appendingPathComponent("proof.json")
        let used = try await RiscBinary.peakMemory(["log", "prove", "--data-dir", large.path, "--jti", "proved"], output: output)
        let baseline = try await RiscBinary.peakMemory(["log", "prove", "--data-dir", small.path, "--jti", "proved"], output: small.appendingPathComponent("proof.json"))
        #expect(used - baseline < 8 << 10, "log prove: peak \(used) KiB against \(baseline) KiB for a log of 100 lines")
        let publicKey = large.appendingPathComponent("key.pub").path
        try key.verifierKey.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let proved = try await RiscBinary.run(["log", "check-proof", output.path, "--key", publicKey, "--jti", "proved"])
        #expect(proved.status == 0 && proved.stdout.hasPrefix("PROVED: 6 lines"), "\(proved.stdout) \(proved.stderr)")
    }
}
