/// A new SET's actions applied in the transaction that stores it ("inline"), the same on every
/// store; the store keeps only its statements (a `Transaction`).
///
/// A batch is written first without savepoints: nothing failing is the common case, and a
/// savepoint per SET costs round trips. If an action fails there, `Unguarded` is thrown, the
/// store rolls the batch's transaction back and writes it again *guarded*: each SET's actions in
/// a savepoint of their own, so that a failure undoes only that SET's, which is then stored
/// pending for the workers to retry with backoff. A SET is acknowledged either way.
public enum InlineActions {
    /// An action failed in a batch written without savepoints: write it again, guarded.
    public struct Unguarded: Error {
        public init() {}
    }

    /// What a store does for one new SET inside its batch's transaction (the SET already stored done).
    public protocol Transaction {
        mutating func savepoint() throws
        mutating func release() throws
        mutating func rollbackToSavepoint() throws
        /// Applies the plan; the outcomes and any further lines (a verification's match).
        mutating func apply(_ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double) throws
            -> (outcomes: [ActionOutcome], followUp: [EventLogRecord])
        /// The SET stored pending instead of done (its actions were undone), for the workers.
        mutating func deferToQueue(setID: Int64) throws
    }

    /// `Transaction` for a store whose statements are awaited.
    public protocol AsyncTransaction {
        mutating func savepoint() async throws
        mutating func release() async throws
        mutating func rollbackToSavepoint() async throws
        mutating func apply(_ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double) async throws
            -> (outcomes: [ActionOutcome], followUp: [EventLogRecord])
        mutating func deferToQueue(setID: Int64) async throws
    }

    /// The event-log lines of one new SET and whether its actions were applied (false: deferred
    /// to the queue). `now`: when the batch started; `clock` gives the latency's end.
    public static func apply<T: Transaction>(
        _ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double, guarded: Bool, in transaction: inout T,
        clock: () -> Double = systemNow
    ) throws -> (lines: [EventLogRecord], applied: Bool) {
        // A row that names the webhook: the worker delivers it and applies the rest (its line then).
        if plan.deliversToWebhook {
            try transaction.deferToQueue(setID: setID)
            return ([], false)
        }
        if guarded { try transaction.savepoint() }
        do {
            let (outcomes, followUp) = try transaction.apply(plan, to: record, setID: setID, now: now)
            if guarded { try transaction.release() }
            return ([line(record, plan, now: now, outcomes: outcomes, end: clock())] + followUp, true)
        } catch {
            guard guarded else { throw Unguarded() }
            try transaction.rollbackToSavepoint()
            try transaction.release()
            try transaction.deferToQueue(setID: setID)
            return ([deferred(record, plan, now: now, error: error)], false)
        }
    }

    /// `apply`, for a store whose statements are awaited.
    public static func apply<T: AsyncTransaction>(
        _ plan: ActionPlan, to record: SETRecord, setID: Int64, now: Double, guarded: Bool, in transaction: inout T,
        clock: () -> Double = systemNow
    ) async throws -> (lines: [EventLogRecord], applied: Bool) {
        if plan.deliversToWebhook {
            try await transaction.deferToQueue(setID: setID)
            return ([], false)
        }
        if guarded { try await transaction.savepoint() }
        do {
            let (outcomes, followUp) = try await transaction.apply(plan, to: record, setID: setID, now: now)
            if guarded { try await transaction.release() }
            return ([line(record, plan, now: now, outcomes: outcomes, end: clock())] + followUp, true)
        } catch {
            guard guarded else { throw Unguarded() }
            try await transaction.rollbackToSavepoint()
            try await transaction.release()
            try await transaction.deferToQueue(setID: setID)
            return ([deferred(record, plan, now: now, error: error)], false)
        }
    }

    /// The `applied` line of a SET applied inline (also for results known without the database).
    public static func line(_ record: SETRecord, _ plan: ActionPlan, now: Double, outcomes: [ActionOutcome], end: Double) -> EventLogRecord {
        var line = started(record, plan, now: now)
        line["actions"] = ActionOutcome.json(outcomes)
        line.latency = end - now
        return line
    }

    /// The line of a SET whose actions failed inline: deferred to the queue, with why.
    static func deferred(_ record: SETRecord, _ plan: ActionPlan, now: Double, error: any Error) -> EventLogRecord {
        var line = started(record, plan, now: now)
        line.outcome = .deferred
        line["error"] = .string(String(describing: error).prefix(300).description)
        return line
    }

    /// A SET's first attempt, as every line of it starts.
    private static func started(_ record: SETRecord, _ plan: ActionPlan, now: Double) -> EventLogRecord {
        var line = EventLogRecord.applied(jti: record.tokenID, attempt: 1, time: now)
        line.describe(plan)
        return line
    }
}
