import Foundation
import RISCCore
import Testing

/// The deployment files checked with what this machine has (there is no container engine here,
/// so the Containerfile is read, not built; issue 26 §10).
@Suite("deploy/ files (read, not run)")
struct DeployFilesTests {
    static func file(_ path: String) throws -> String {
        try String(contentsOf: RiscBinary.repository.appendingPathComponent(path), encoding: .utf8)
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
