/// The operators' event log: one JSON object per line for every step risc takes.
public protocol EventLog: Sendable {
    /// Appends one record. Never blocks on I/O and never throws: the log is buffered.
    func record(_ record: EventLogRecord)
}

/// One line of the event log. Versioned (`v`); never carries a token or a secret. Its step and
/// outcome are typed: metrics are observed from the values risc decided, never read back out of
/// a line's text.
public struct EventLogRecord: Sendable {
    /// What risc was doing.
    public enum Step: String, Sendable, CaseIterable {
        case received, applied, published, verification, lease, connection, outage, log, replayed, retention, serve, tls, site, config
    }

    /// How it ended. A value type rather than an enum so a step may name outcomes of its own
    /// (the admin API's `site` changes), each a constant.
    public struct Outcome: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // received
        public static let accepted = Self(rawValue: "accepted"), duplicate = Self(rawValue: "duplicate")
        public static let rejected = Self(rawValue: "rejected"), failed = Self(rawValue: "failed")
        public static let limited = Self(rawValue: "limited"), suppressed = Self(rawValue: "suppressed")
        public static let malformed = Self(rawValue: "malformed"), tooLarge = Self(rawValue: "too_large"), overflow = Self(rawValue: "overflow")
        public static let notFound = Self(rawValue: "not_found"), methodNotAllowed = Self(rawValue: "method_not_allowed")
        // applied, published
        public static let applied = Self(rawValue: "applied"), deferred = Self(rawValue: "deferred")
        public static let deadLettered = Self(rawValue: "dead_lettered"), leaseLost = Self(rawValue: "lease_lost")
        public static let published = Self(rawValue: "published")
        // verification
        public static let matched = Self(rawValue: "matched"), unrequested = Self(rawValue: "unrequested")
        public static let noState = Self(rawValue: "no_state")
        // the rest
        public static let rescued = Self(rawValue: "rescued"), closed = Self(rawValue: "closed"), refused = Self(rawValue: "refused")
        public static let started = Self(rawValue: "started"), ended = Self(rawValue: "ended"), stopped = Self(rawValue: "stopped")
        public static let dropped = Self(rawValue: "dropped"), requeued = Self(rawValue: "requeued"), pruned = Self(rawValue: "pruned")
        public static let reloaded = Self(rawValue: "reloaded")
        // log: the chain's first line, the line after a torn one, a segment closed
        public static let genesis = Self(rawValue: "genesis"), torn = Self(rawValue: "torn"), rotated = Self(rawValue: "rotated")
        // site: what the site changed (the admin API, risc accounts link and unlink, risc linking
        // revoke); `relinked`: a Google account moved to another of the site's users
        public static let unlinked = Self(rawValue: "unlinked"), linkedTokensRevoked = Self(rawValue: "linked_tokens_revoked")
        public static let relinked = Self(rawValue: "relinked")

        /// Every outcome the event log carries (`risc tail --outcome` refuses another).
        public static let all: [Outcome] = [
            .accepted, .duplicate, .rejected, .failed, .limited, .suppressed, .malformed, .tooLarge, .overflow, .notFound, .methodNotAllowed,
            .applied, .deferred, .deadLettered, .leaseLost, .published, .matched, .unrequested, .noState, .rescued, .closed, .refused,
            .started, .ended, .stopped, .dropped, .requeued, .pruned, .reloaded, .genesis, .torn, .rotated, .unlinked, .linkedTokensRevoked,
            .relinked,
        ]

        /// An action attempt's outcomes, in the order metrics list them.
        public static let actionOutcomes: [Outcome] = [.applied, .deferred, .failed, .deadLettered, .leaseLost]
    }

    public var fields: JSONObject
    public let step: Step
    public var outcome: Outcome {
        didSet { fields["outcome"] = .string(outcome.rawValue) }
    }
    /// How long the step took, as `latency_us`.
    public var latency: Double? {
        didSet { fields["latency_us"] = latency.map { .number(($0 * 1e6).rounded()) } }
    }

    /// A record for `step` with `outcome` at `time` (seconds since the epoch).
    public init(step: Step, outcome: Outcome, time: Double) {
        self.step = step
        self.outcome = outcome
        fields = JSONObject(reservingCapacity: 16)  // a SET's lines have 9 to 15 fields: grown once, not four times
        fields["v"] = 1
        fields["ts"] = .string(Timestamp.iso8601(time))
        fields["step"] = .string(step.rawValue)
        fields["outcome"] = .string(outcome.rawValue)
    }

    /// What the site changed to an account (`step: site`): `source` says through what (`admin_api`,
    /// `cli`), `notices` whether unlink notices to Google are on, then `fields` (counts).
    public static func site(
        _ outcome: Outcome, source: String, subject: String, notices: Bool, time: Double, fields: JSONObject
    ) -> EventLogRecord {
        var line = EventLogRecord(step: .site, outcome: outcome, time: time)
        line["source"] = .string(source)
        line["subject"] = .string(Printable.safe(subject, maxBytes: 200))
        line["notices"] = .bool(notices)
        for (name, value) in fields { line[name] = value }
        return line
    }

    public subscript(name: String) -> JSONValue? {
        get { fields[name] }
        set {
            assert(name != "step" && name != "outcome" && name != "latency_us", "set through the typed property")
            fields[name] = newValue
        }
    }

    /// The line, without its newline.
    public var line: String { JSONValue.object(fields).serialized }

    /// Appends the line and its newline, as UTF-8.
    public func write(to output: inout [UInt8]) {
        JSONValue.object(fields).serialize(into: &output)
        output.append(0x0A)
    }
}

extension EventLog {
    /// Writes the lines a store returned for what it did with a SET in the transaction that stored
    /// it (actions applied inline), counting each attempt with the outcome the store decided.
    public func record(_ followUp: [EventLogRecord], metrics: (any WorkMetrics)?) {
        for line in followUp {
            if line.step == .applied { metrics?.observeAction(outcome: line.outcome, seconds: line.latency) }
            record(line)
        }
    }
}

/// What the workers report as they decide it (Prometheus in `risc serve`).
public protocol WorkMetrics: Sendable {
    /// One attempt at a SET's actions (`EventLogRecord.Outcome.actionOutcomes`) and how long it took.
    func observeAction(outcome: EventLogRecord.Outcome, seconds: Double?)
    /// One attempt to publish an unlink notice; `refused`: a queued row risc did not make.
    func observeNotice(outcome: EventLogRecord.Outcome, refused: Bool)
}

/// Ports the receiver reports its own measurements to (Prometheus in `risc serve`).
public protocol IntakeMetrics: WorkMetrics {
    /// One request's outcome: `accepted`, `duplicate`, `rejected` (with `err`) or `failed`.
    func observe(outcome: String, err: String?, verifySeconds: Double?, commitSeconds: Double?)
}
