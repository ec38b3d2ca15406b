/// RFC 8417 §5.3–5.4: events may arrive late and out of order. The rule risc applies, as values,
/// so every store applies it the same way (and tests it without a database).
///
/// Events are ordered by their time: `toe` if given, else `iat` (`ActionPlan.eventTime`).
///
/// - An **access change** (suspend or restore Google sign-in or email recovery) applies only if
///   no newer access change has been applied to the account: an older event never undoes a newer
///   one. A store must make this check and the update one atomic step (a conditional UPDATE),
///   so that two receivers applying two events for one account at the same instant cannot both
///   pass the check on a stale read.
/// - **Ending sessions** ends only sessions created at or before the event (`iat` has whole
///   seconds, so a session opened within that second counts as before it): a user who signed in
///   again after securing the account keeps the new session.
public enum OrderingRule {
    /// Whether an access change from an event at `eventTime` may apply to an account whose last
    /// applied access change happened at `lastAccessChange` (nil: never).
    public static func accessChangeApplies(eventTime: Double, lastAccessChange: Double?) -> Bool {
        (lastAccessChange ?? 0) <= eventTime
    }

    /// The account's access-change time once an event at `eventTime` has applied.
    public static func accessChangeTime(after lastAccessChange: Double?, eventTime: Double) -> Double {
        max(lastAccessChange ?? 0, eventTime)
    }

    /// The latest creation time of a session that an event at `eventTime` ends.
    public static func sessionCutoff(eventTime: Double) -> Double { eventTime + 1 }

    /// What the event log says for an access change the rule held back.
    public static let superseded = "superseded by a newer access change"
}
