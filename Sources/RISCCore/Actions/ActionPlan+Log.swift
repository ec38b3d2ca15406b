extension Subject {
    /// An email this subject names, for the fallback lookup.
    public var email: String? {
        switch self {
        case .email(let email): email
        case .idTokenClaims(_, _, let email?, _): email
        case .aliases(let items): items.lazy.compactMap(\.email).first
        case .complex: member("user")?.email
        default: nil
        }
    }
}

extension EventLogRecord {
    /// The start of the `applied` line of one attempt at a SET's actions (every store and worker
    /// writes one): its `jti` and which attempt this is (1 for the first).
    public static func applied(jti: String, attempt: Int, time: Double) -> EventLogRecord {
        var record = EventLogRecord(step: .applied, outcome: .applied, time: time)
        record["jti"] = .string(jti)
        record["attempt"] = .number(Double(attempt))
        return record
    }

    /// The line of one attempt to publish an unlink notice (`UnlinkNotices`).
    public static func published(jti: String, attempt: Int, time: Double) -> EventLogRecord {
        var record = EventLogRecord(step: .published, outcome: .published, time: time)
        record["jti"] = .string(jti)
        record["attempt"] = .number(Double(attempt))
        record["events"] = ["token-revoked"]
        record["destination"] = "google"
        return record
    }

    /// The plan's event types and first Google subject, on an `applied` line.
    public mutating func describe(_ plan: ActionPlan) {
        self["events"] = .array(plan.steps.map { .string($0.type.shortName) })
        if let subject = plan.steps.lazy.compactMap({ $0.subject?.googleSubject?.subject }).first {
            self["subject"] = .string(subject)
        }
    }
}
