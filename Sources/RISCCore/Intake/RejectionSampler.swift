import Synchronization

/// Bounds the event-log lines that refused requests write, so a flood of junk cannot fill the
/// disk or drown the lines that matter (13 MB/s from one connection before this existed).
///
/// Every refusal is still counted in the metrics; only its log line is sampled. Each client
/// address may write `perAddressBurst` lines, refilled evenly over a minute, and all addresses
/// together at most `totalPerSecond` a second (with a burst of twice that). What is held back is
/// counted per address and outcome and written by `summaries(now:)`, which the push endpoint
/// calls every few seconds and at shutdown: one line a flooding address,
/// `{"step":"received","outcome":"suppressed","remote":…,"count":N,"by_outcome":{…}}`.
/// Memory is bounded: at most `maximumAddresses` addresses are tracked one by one; past that,
/// new addresses share the entry `"other"`.
public final class RejectionSampler: Sendable {
    public let perAddressBurst: Double
    public let totalPerSecond: Double
    public let maximumAddresses: Int

    struct Entry {
        var tokens: Double
        var updated: Double
        var suppressed: [String: Int] = [:]
    }

    struct State {
        var entries: [String: Entry] = [:]
        var totalTokens: Double
        var totalUpdated: Double
    }

    private let state: Mutex<State>

    public init(perAddressBurst: Int = 20, totalPerSecond: Int = 100, maximumAddresses: Int = 4_096) {
        self.perAddressBurst = Double(perAddressBurst)
        self.totalPerSecond = Double(totalPerSecond)
        self.maximumAddresses = maximumAddresses
        state = Mutex(State(totalTokens: Double(totalPerSecond) * 2, totalUpdated: 0))
    }

    /// Whether a refusal from `address` with `outcome` may write its line now; if not, it is
    /// counted for the next summary.
    public func admit(_ address: String?, outcome: String, now: Double) -> Bool {
        state.withLock { state in
            state.totalTokens = min(totalPerSecond * 2, state.totalTokens + max(0, now - state.totalUpdated) * totalPerSecond)
            state.totalUpdated = now
            var key = address ?? "-"
            if state.entries[key] == nil && state.entries.count >= maximumAddresses { key = "other" }
            var entry = state.entries[key] ?? Entry(tokens: perAddressBurst, updated: now)
            entry.tokens = min(perAddressBurst, entry.tokens + max(0, now - entry.updated) * perAddressBurst / 60)
            entry.updated = now
            let admitted = entry.tokens >= 1 && state.totalTokens >= 1
            if admitted {
                entry.tokens -= 1
                state.totalTokens -= 1
            } else {
                entry.suppressed[outcome, default: 0] += 1
            }
            state.entries[key] = entry
            return admitted
        }
    }

    /// One line per address whose lines were held back since the last call; forgets addresses
    /// whose allowance has refilled and that have nothing to report.
    public func summaries(now: Double) -> [EventLogRecord] {
        state.withLock { state in
            var records: [EventLogRecord] = []
            for (key, var entry) in state.entries {
                if !entry.suppressed.isEmpty {
                    var record = EventLogRecord(step: .received, outcome: .suppressed, time: now)
                    if key != "-" { record["remote"] = .string(key) }
                    record["count"] = .number(Double(entry.suppressed.values.reduce(0, +)))
                    var byOutcome = JSONObject()
                    for (outcome, count) in entry.suppressed.sorted(by: { $0.key < $1.key }) { byOutcome[outcome] = .number(Double(count)) }
                    record["by_outcome"] = .object(byOutcome)
                    records.append(record)
                    entry.suppressed = [:]
                    state.entries[key] = entry
                } else if entry.tokens + max(0, now - entry.updated) * perAddressBurst / 60 >= perAddressBurst {
                    state.entries[key] = nil
                }
            }
            return records.sorted { ($0["remote"]?.stringValue ?? "") < ($1["remote"]?.stringValue ?? "") }
        }
    }
}
