import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

/// Issue 16: counters started empty after a restart, no build info, no process metrics, nothing
/// about the actions; the alert rules and the dashboard must name metrics that exist.
@Suite("metrics, alert rules and dashboard (the built binary)", .serialized)
struct MetricsCommandTests {
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs promtool; its status and what it printed.
    static func run(_ promtool: String, _ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        let result = try await RiscBinary.run(arguments, stdin: stdin, executable: URL(fileURLWithPath: promtool))
        return (result.status, result.stdout + result.stderr)
    }

    /// The value of the series `series` (name with its labels, as exported), if exported.
    static func value(_ scrape: String, _ series: String) -> Double? {
        scrape.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Found: under the shipped unit (`ProcSubset=pid`: only processes' directories in /proc),
    /// `process_start_time_seconds` was missing from `/metrics`: its boot time came from
    /// /proc/stat, which the receiver cannot read there. (Shown here with /proc/stat hidden in a
    /// mount namespace of the receiver's own, which needs root.)
    @Test("process_start_time_seconds is exported without /proc/stat", .enabled(if: geteuid() == 0))
    func startTimeWithoutProcStat() async throws {
        let hidden = ["/usr/bin/unshare", "--mount", "--", "/bin/sh", "-c", #"mount --bind /dev/null /proc/stat && exec "$0" "$@""#]
        let serve = try await ServeCommandTests.startServe(runAs: hidden)
        defer { if serve.process.isRunning { serve.process.terminate() } }
        let scrape = try await CurlHTTPClient.patient().perform(HTTPRequest(url: "http://127.0.0.1:\(serve.admin)/metrics"))
        let text = String(decoding: scrape.body, as: UTF8.self)
        let started = try #require(Self.value(text, "process_start_time_seconds"), "process_start_time_seconds is missing")
        #expect(abs(started - Date().timeIntervalSince1970) < 120)
    }

    @Test("every labelled series exists from the start at 0; build info, process metrics; actions counted with their latency; promtool accepts the output")
    func exported() async throws {
        let promtool = try #require(Self.promtool, "promtool is missing: scripts/bootstrap --tests installs Debian's prometheus package")
        let serve = try await ServeCommandTests.startServe()
        defer { if serve.process.isRunning { serve.process.terminate() } }
        let client = CurlHTTPClient.patient()
        func scrape() async throws -> String {
            String(decoding: try await client.perform(HTTPRequest(url: "http://127.0.0.1:\(serve.admin)/metrics")).body, as: UTF8.self)
        }
        let fresh = try await scrape()
        for series in [
            #"risc_sets_total{outcome="accepted"}"#, #"risc_sets_total{outcome="failed"}"#,
            #"risc_sets_total{outcome="rejected",err="invalid_audience"}"#, #"risc_sets_total{outcome="rejected",err="authentication_failed"}"#,
            #"risc_actions_total{target="accounts",outcome="applied"}"#, #"risc_actions_total{target="accounts",outcome="failed"}"#,
            #"risc_actions_total{target="accounts",outcome="dead_lettered"}"#, #"risc_notices_total{outcome="failed"}"#,
            "risc_queue_retrying", "risc_queue_dead", #"risc_action_duration_seconds_count{target="accounts"}"#,
        ] {
            #expect(Self.value(fresh, series) == 0, "\(series) starts at 0")
        }
        #expect(fresh.contains(#"risc_build_info{version="0.1.0",commit=""#))
        #expect((Self.value(fresh, "process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((Self.value(fresh, "process_open_fds") ?? 0) > 3 && Self.value(fresh, "process_cpu_seconds_total") != nil)
        #expect(abs((Self.value(fresh, "process_start_time_seconds") ?? 0) - Date().timeIntervalSince1970) < 120)

        let token = try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/sample-account-disabled.jwt"), encoding: .utf8)
        let answer = try await client.perform(
            HTTPRequest(
                method: "POST", url: "http://127.0.0.1:\(serve.port)/events", headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(token.trimmingCharacters(in: .whitespacesAndNewlines).utf8)))
        #expect(answer.status == 202)
        var after = try await scrape()
        for _ in 0..<50 where Self.value(after, #"risc_actions_total{target="accounts",outcome="applied"}"#) != 1 {
            try await Task.sleep(for: .milliseconds(100))
            after = try await scrape()
        }
        #expect(Self.value(after, #"risc_sets_total{outcome="accepted"}"#) == 1)
        #expect(Self.value(after, #"risc_actions_total{target="accounts",outcome="applied"}"#) == 1)
        #expect(Self.value(after, #"risc_action_duration_seconds_count{target="accounts"}"#) == 1)
        let checked = try await Self.run(promtool, ["check", "metrics"], stdin: after)
        #expect(checked.status == 0, "promtool check metrics: \(checked.output)")

        serve.process.terminate()
        await serve.process.exited()

        // The shipped rules and dashboard name only metrics a receiver exports: this one, and one as
        // in production, over HTTPS with keys from a discovery document (the key-set fetch and
        // certificate metrics exist only then).
        let directory = Scratch.root.appendingPathComponent("risc-metrics-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory)
        let issuer = try LocalIssuer(
            jwks: try String(contentsOf: RiscBinary.repository.appendingPathComponent("keys/test/jwks.json"), encoding: .utf8),
            issuer: SETFactory.defaultIssuer)
        defer { issuer.server.stop() }
        let production = try await ServeCommandTests.startServe(
            extra: ["--discovery-url", issuer.discoveryURL, "--tls-cert", certificate.certificatePath, "--tls-key", certificate.keyPath],
            pinned: false)
        defer { if production.process.isRunning { production.process.terminate() } }
        let secure = String(decoding: try await client.perform(HTTPRequest(url: "http://127.0.0.1:\(production.admin)/metrics")).body, as: UTF8.self)
        production.process.terminate()
        await production.process.exited()
        #expect(try await Self.run(promtool, ["check", "metrics"], stdin: secure).status == 0)
        let exported = Set(
            (after + "\n" + secure).split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
                $0.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map(String.init)
            })
        let rules = try String(contentsOf: RiscBinary.repository.appendingPathComponent("deploy/prometheus/risc-alerts.yml"), encoding: .utf8)
        let dashboard = try String(contentsOf: RiscBinary.repository.appendingPathComponent("deploy/grafana/risc-dashboard.json"), encoding: .utf8)
        let expressions =
            try JSONParser.parseObject(Array(dashboard.utf8))["panels"]?.arrayValue?.flatMap {
                $0.objectValue?["targets"]?.arrayValue?.compactMap { $0.objectValue?["expr"]?.stringValue } ?? []
            } ?? []
        #expect(expressions.count >= 16)
        let named = (rules + "\n" + expressions.joined(separator: "\n")).matches(of: /\b(?:risc|process)_[a-z_]+\b/).map { String($0.output) }
        #expect(Set(named).count >= 15)
        for name in Set(named) { #expect(exported.contains(name), "\(name) is named in deploy/ but not exported") }
    }

    @Test("promtool check rules accepts the shipped alert rules")
    func rules() async throws {
        let promtool = try #require(Self.promtool, "promtool is missing: scripts/bootstrap --tests installs Debian's prometheus package")
        let result = try await Self.run(promtool, ["check", "rules", "deploy/prometheus/risc-alerts.yml"])
        #expect(result.status == 0 && result.output.contains("SUCCESS: 17 rules found"), "\(result.output)")
    }

    @Test("issue 26 §6: the runbook lists every shipped alert by name with its expression as shipped, and no other")
    func runbookMatchesRules() throws {
        let rules = try String(contentsOf: RiscBinary.repository.appendingPathComponent("deploy/prometheus/risc-alerts.yml"), encoding: .utf8)
        let runbook = try String(contentsOf: RiscBinary.repository.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        var shipped: [String: String] = [:]
        let lines = rules.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (index, line) in lines.enumerated() where line.trimmingCharacters(in: .whitespaces).hasPrefix("- alert: ") {
            let name = line.components(separatedBy: "- alert: ")[1].trimmingCharacters(in: .whitespaces)
            shipped[name] = lines[index + 1].components(separatedBy: "expr: ")[1]
        }
        #expect(shipped.count == 17)
        for (name, expr) in shipped {
            let row = "| `\(name)` | `\(expr.replacingOccurrences(of: "|", with: "\\|"))`"
            #expect(runbook.contains(row), "docs/operations.md lacks the row \(row)")
        }
        let documented = runbook.split(separator: "\n").filter { $0.hasPrefix("| `Risc") }.compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(Set(documented) == Set(shipped.keys), "documented but not shipped: \(Set(documented).subtracting(shipped.keys))")
    }

    @Test("promtool test rules: the shipped alerts fire as their unit tests say (a store down with no traffic among them)")
    func ruleTests() async throws {
        let promtool = try #require(Self.promtool, "promtool is missing: scripts/bootstrap --tests installs Debian's prometheus package")
        let result = try await Self.run(promtool, ["test", "rules", "deploy/prometheus/risc-alerts.test.yml"])
        #expect(result.status == 0 && result.output.contains("SUCCESS"), "\(result.output)")
    }
}
