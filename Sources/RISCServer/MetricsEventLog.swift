import RISCCore

/// Counts what the workers do as it is written to the event log: one place sees every attempt on
/// either store (applied inline, by the embedded worker, or by queue workers on PostgreSQL).
/// `step: applied` lines count in `risc_actions_total{target, outcome}` with their `latency_us`
/// in `risc_action_duration_seconds`; `step: published` lines in `risc_notices_total{outcome}` (`refused`: a queued row risc did not make).
struct MetricsEventLog: EventLog {
    let base: any EventLog
    let metrics: ReceiverMetrics
    /// `accounts` (the embedded or shared account store) or `webhook`.
    let target: String

    func record(_ record: EventLogRecord) {
        switch (record["step"]?.stringValue, record["outcome"]?.stringValue) {
        case ("applied", let outcome?):
            metrics.observeAction(target: target, outcome: outcome, seconds: record["latency_us"]?.numberValue.map { $0 / 1e6 })
        case ("published", let outcome?):
            // A row refused before signing (not one risc queued) is dead-lettered; counted apart.
            metrics.observeNotice(outcome: record["refused"] == .bool(true) ? "refused" : outcome)
        default:
            break
        }
        base.record(record)
    }
}
