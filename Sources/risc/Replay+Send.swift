import Foundation
import RISCClient
import RISCCore
import Synchronization

/// `risc replay --to`: sending SETs to a receiver, `concurrency` at a time and at most `rate` a
/// second, and the summary of its answers.
extension RiscCommand.Replay {
    /// One replay's sending, over one or several calls of `send` (a page each): its client, its
    /// summary, how many were started (the rate's schedule and the progress bar go on across
    /// pages) and how many it will send in all.
    final class Progress: Sendable {
        let client: CurlHTTPClient
        let total: Int
        let start = Date()
        let terminal = isatty(STDERR_FILENO) == 1
        let summary = Mutex(Summary())
        let next = Mutex(0)

        init(client: CurlHTTPClient, total: Int) { (self.client, self.total) = (client, total) }

        /// The summary, once every page is sent (the progress bar's line ended).
        func finish() -> Summary {
            if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
            return summary.withLock { $0 }
        }
    }

    struct Summary: Sendable {
        var sent = 0
        var accepted = 0
        var byError: [String: Int] = [:]
        var serverErrors = 0
        var transport = 0
        /// What the first transport error was (the receiver not listening, a name that does not resolve, TLS).
        var firstTransportError: String?
        var latencies: [Double] = []

        var failures: Int { sent - accepted }

        var table: String {
            let sorted = latencies.sorted()
            func percentile(_ p: Double) -> String {
                guard !sorted.isEmpty else { return "-" }
                return String(format: "%.1f ms", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000)
            }
            var rows = [("sent", "\(sent)"), ("202", "\(accepted)")]
            for (label, count) in byError.sorted(by: { $0.key < $1.key }) { rows.append((label, "\(count)")) }
            rows.append(("5xx", "\(serverErrors)"))
            rows.append(("transport errors", "\(transport)"))
            rows.append(("latency p50 / p95 / p99", "\(percentile(0.5)) / \(percentile(0.95)) / \(percentile(0.99))"))
            let width = max(26, (rows.map(\.0.count).max() ?? 0) + 1)
            var lines = rows.map { $0.0.padded(width) + $0.1 }
            if let firstTransportError {
                lines.insert("  first: " + Printable.safe(firstTransportError, maxBytes: 300), at: lines.count - 1)
            }
            return lines.joined(separator: "\n")
        }
    }

    /// Sends `tokens`, `concurrency` at a time, at most `rate` a second from `progress`'s start.
    func send(_ tokens: [String], to url: String, progress shared: Progress) async throws {
        let client = shared.client
        let interval = rate > 0 ? 1 / rate : 0
        let offset = shared.next.withLock { $0 }  // this page's first SET, in the whole replay
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<min(concurrency, tokens.count) {
                group.addTask {
                    while true {
                        let index = shared.next.withLock { value -> Int in
                            guard value - offset < tokens.count else { return value }
                            defer { value += 1 }
                            return value
                        }
                        guard index - offset < tokens.count else { return }
                        if interval > 0 {
                            let due = shared.start.addingTimeInterval(Double(index) * interval).timeIntervalSinceNow
                            if due > 0 { try await Task.sleep(for: .seconds(due)) }
                        }
                        let began = Date()
                        var transportError: (any Error)?
                        let response: HTTPResponse?
                        do {
                            response = try await client.perform(
                                HTTPRequest(
                                    method: "POST", url: url,
                                    headers: [("Content-Type", "application/secevent+jwt"), ("Accept", "application/json")],
                                    body: Array(tokens[index - offset].utf8)))
                        } catch {
                            (response, transportError) = (nil, error)
                        }
                        let elapsed = Date().timeIntervalSince(began)
                        let done = shared.summary.withLock { summary -> Int in
                            summary.sent += 1
                            summary.latencies.append(elapsed)
                            switch response?.status {
                            case 202?: summary.accepted += 1
                            case 400?:
                                let code = (try? JSONParser.parseObject(response!.body))?["err"]?.stringValue ?? "?"
                                summary.byError["400 \(Printable.safe(code, maxBytes: 40))", default: 0] += 1
                            case let status? where status >= 500: summary.serverErrors += 1
                            case nil:
                                summary.transport += 1
                                if summary.firstTransportError == nil { summary.firstTransportError = transportError.map { "\($0)" } }
                            case let status?: summary.byError[Self.label(status: status), default: 0] += 1
                            }
                            return summary.sent
                        }
                        if shared.terminal { Self.progress(done, of: shared.total) }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// A summary row's label for an answer other than 202, 400 and 5xx: the status, with what it
    /// most likely means. Found: a 404 was "400 http 404", as if the receiver had refused the SET.
    static func label(status: Int) -> String {
        switch status {
        case 404, 405: "\(status) (not a receiver's path?)"
        case 401, 403: "\(status) (credentials refused)"
        case 413: "413 (over the receiver's max_body_bytes)"
        case 429: "429 (rate limited)"
        default: "\(status)"
        }
    }

    static func progress(_ done: Int, of total: Int) {
        let width = 30
        let filled = total == 0 ? width : done * width / total
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total)".utf8))
    }
}
