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

    /// How far past the time it is planned an event's time counts (`SETPolicy`'s default clock-skew
    /// allowance): an event dated a year ahead by a clock gone wrong would otherwise hold every
    /// later access change of the account back for that year.
    public static let futureAllowance = SETPolicy.defaultClockSkew

    /// The time an event sent as happening at `sent` is ordered by, planned at `now`.
    public static func eventTime(sent: Double, now: Double) -> Double { min(sent, now + futureAllowance) }

    /// The latest creation time of a session that an event at `eventTime` ends.
    public static func sessionCutoff(eventTime: Double) -> Double { eventTime + 1 }

    /// What the event log says for an access change the rule held back.
    public static let superseded = "superseded by a newer access change"
}
