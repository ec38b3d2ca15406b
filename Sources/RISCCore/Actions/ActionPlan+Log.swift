extension Subject {
    /// An email this subject names, for the fallback lookup.
    public var email: String? {
        switch self {
        case .email(let email): email
        case .idTokenClaims(_, _, let email?, _): email
        case .aliases(let items): items.lazy.compactMap(\.email).first
        default: nil
        }
    }
}

extension EventLogRecord {
    /// The plan's event types and first Google subject, on an `applied` line.
    public mutating func describe(_ plan: ActionPlan) {
        self["events"] = .array(plan.steps.map { .string($0.type.shortName) })
        if let subject = plan.steps.lazy.compactMap({ $0.subject?.googleSubject?.subject }).first {
            self["subject"] = .string(subject)
        }
    }
}
