/// The operators' event log: one JSON object per line for every step risc takes.
public protocol EventLog: Sendable {
    /// Appends one record. Never blocks on I/O and never throws: the log is buffered.
    func record(_ record: EventLogRecord)
}

/// One line of the event log. Versioned (`v`); never carries a token or a secret.
public struct EventLogRecord: Sendable {
    public var fields: JSONObject

    /// A record for `step` (`received`, `applied`, …) with `outcome` (`accepted`, `duplicate`,
    /// `rejected`, `failed`, …) at `time` (seconds since the epoch).
    public init(step: String, outcome: String, time: Double) {
        fields = JSONObject()
        fields["v"] = 1
        fields["ts"] = .string(Timestamp.iso8601(time))
        fields["step"] = .string(step)
        fields["outcome"] = .string(outcome)
    }

    public subscript(name: String) -> JSONValue? {
        get { fields[name] }
        set { fields[name] = newValue }
    }

    /// The line, without its newline.
    public var line: String { JSONValue.object(fields).serialized }

    /// Appends the line and its newline, as UTF-8.
    public func write(to output: inout [UInt8]) {
        JSONValue.object(fields).serialize(into: &output)
        output.append(0x0A)
    }
}

/// Ports the receiver reports its own measurements to (Prometheus in `risc serve`).
public protocol IntakeMetrics: Sendable {
    /// One request's outcome: `accepted`, `duplicate`, `rejected` (with `err`) or `failed`.
    func observe(outcome: String, err: String?, verifySeconds: Double?, commitSeconds: Double?)
}
