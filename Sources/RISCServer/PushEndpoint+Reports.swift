import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RISCCore
import Synchronization

/// What the public listener tells operators about requests it refuses and outages it answers 503
/// through: counted in the metrics, logged to the event log sampled per address (one summary line
/// for what was held back), outages logged when they start and end; and the client address those
/// lines name.
extension PushEndpoint {
    /// Records that SETs are answered 503 for `reason`; true when that starts an outage, which
    /// then writes one event-log line (`{"step":"outage","outcome":"started","reason":…}`).
    func becameUnavailable(_ reason: String) -> Bool {
        let started = unavailability.withLock { current in
            defer { current = reason }
            return current != reason
        }
        if started {
            var record = EventLogRecord(step: .outage, outcome: .started, time: now())
            record["reason"] = .string(reason)
            intake.log.record(record)
        }
        return started
    }

    /// Records a SET accepted; the reason of the outage it ends, if one (written to the event log
    /// as `{"step":"outage","outcome":"ended","reason":…}`).
    func becameAvailable() -> String? {
        let ended = unavailability.withLock { current in
            defer { current = nil }
            return current
        }
        if let ended {
            var record = EventLogRecord(step: .outage, outcome: .ended, time: now())
            record["reason"] = .string(ended)
            intake.log.record(record)
        }
        return ended
    }

    /// Writes one line per address whose refusals were held back from the event log.
    func writeSuppressedSummaries() {
        for record in rejections.summaries(now: now()) { intake.log.record(record) }
    }

    /// Counts a refused request in the metrics (`risc_sets_total` unless it is no SET's) and writes
    /// its event-log line, sampled.
    func reject(_ record: EventLogRecord, outcome: String, countedAsSET: Bool = true) {
        if countedAsSET { intake.metrics?.observe(outcome: outcome, err: nil, verifySeconds: nil, commitSeconds: nil) }
        if rejections.admit(record["remote"]?.stringValue, outcome: outcome, now: now()) {
            intake.log.record(record)
        }
    }

    /// The event-log line of a request refused before any SET was read from it.
    func rejectedRecord(status: HTTPResponseStatus, remote: String?) -> EventLogRecord {
        var record = EventLogRecord(step: .received, outcome: .rejected, time: now())
        record["http_status"] = .number(Double(status.code))
        if let remote { record["remote"] = .string(remote) }
        return record
    }

    /// A 404 or 405: counted apart from SETs (`risc_push_requests_refused_total`: scanners' noise
    /// is not a SET outcome), and logged (sampled).
    func refused(_ status: HTTPResponseStatus, path: String, remote: String?) {
        var record = rejectedRecord(status: status, remote: remote)
        record["path"] = .string(Printable.safe(path, maxBytes: 100))
        let outcome = status == .notFound ? "not_found" : "method_not_allowed"
        metrics?.requestRefused(outcome)
        reject(record, outcome: outcome, countedAsSET: false)
    }

    /// A request NIO's decoder could not read: counted, and logged (sampled).
    func malformedRequest(_ error: SETError, remote: String?) {
        var record = rejectedRecord(status: .badRequest, remote: remote)
        record["err"] = .string(error.code.rawValue)
        record["description"] = .string(error.description)
        reject(record, outcome: "malformed")
    }

    /// A client closed for having more pipelined requests waiting than its bound (it does not
    /// read its answers): counted, and logged (sampled).
    func overflowed(remote: String?) {
        var record = EventLogRecord(step: .connection, outcome: .closed, time: now())
        record["reason"] = "pipelined_requests_over_limit"
        if let remote { record["remote"] = .string(remote) }
        metrics?.connectionOverflowed()
        if rejections.admit(remote, outcome: "overflow", now: now()) { intake.log.record(record) }
    }
}
