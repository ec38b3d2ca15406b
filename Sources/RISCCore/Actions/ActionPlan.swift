/// What to do for one stored SET: per event, the subject and the actions, and the time that
/// orders it against other events about the same account.
public struct ActionPlan: Sendable {
    public struct Step: Sendable {
        /// Position of the event in the SET's `events` (for idempotency keys).
        public let eventIndex: Int
        public let type: EventType
        public let reason: String?
        public let subject: Subject?
        public let actions: [Action]
        /// The event's `state` (verification).
        public let state: String?
        /// The scope of the issuer the subject names, an alias resolved (`ActionTable.accountScope`);
        /// nil when it names none (the SET's key issuer's then).
        public var subjectScope: String?

        /// The scope the subject's accounts are linked under, for a SET of `keyIssuer`'s.
        public func accountScope(keyIssuer: String) -> String { subjectScope ?? SETPolicy.issuerScope(keyIssuer) }

        /// What the stores record as a session's `ended_reason` or a token's `revoked_reason`:
        /// the event's short name and its reason (`account-disabled:hijacking`).
        public var recordedReason: String { type.canonical.shortName + (reason.map { ":\($0)" } ?? "") }
    }

    public let steps: [Step]

    /// Whether an event's row names the action `webhook` (`webhook.scope = rows`).
    public var deliversToWebhook: Bool { steps.contains { $0.actions.contains(.webhook) } }

    /// What the webhook is told when rows choose it: the events whose row names `webhook`, each
    /// with the row's other actions (those risc applies to its own accounts).
    public var webhookNotice: ActionPlan {
        ActionPlan(
            steps: steps.filter { $0.actions.contains(.webhook) }.map {
                Step(
                    eventIndex: $0.eventIndex, type: $0.type, reason: $0.reason, subject: $0.subject, actions: $0.actions.filter { $0 != .webhook },
                    state: $0.state, subjectScope: $0.subjectScope)
            },
            eventTime: eventTime)
    }
    /// When the event happened, for ordering: `toe` if given, else CAEP's `event_timestamp` (SSF
    /// sends one event a SET), else `iat`: one clock across transmitters; at most
    /// `OrderingRule.futureAllowance` past the time it was planned.
    public let eventTime: Double

    /// RFC 8417 §5.3–5.4: events may arrive late or out of order. risc orders by `toe`, else
    /// `iat`: an access change (suspend/restore) applies only if no newer one has been applied
    /// to the account, and "end sessions" ends only sessions created at or before the event time,
    /// so a user who signed in again after securing the account keeps the new session.
    public static func plan(for token: SecurityEventToken, table: ActionTable, now: Double) -> ActionPlan {
        let steps = token.events.enumerated().map { index, event in
            Step(
                eventIndex: index, type: event.type, reason: event.reason, subject: event.subject,
                actions: table.actions(for: event, issuer: token.issuer), state: event.state,
                subjectScope: event.subject?.googleSubject?.issuer.map(table.accountScope))
        }
        let eventTimestamp = token.events.lazy.compactMap(\.eventTimestamp).first
        return ActionPlan(steps: steps, eventTime: OrderingRule.eventTime(sent: token.timeOfEvent ?? eventTimestamp ?? token.issuedAt ?? 0, now: now))
    }
}
