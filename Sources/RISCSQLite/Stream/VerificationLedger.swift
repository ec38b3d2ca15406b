import Foundation
public import RISCCore

/// The `state` values `risc stream verify` asked Google to send back, and the verification SETs
/// that carried them: the two ends of the round trip, kept in the receiver's store so the
/// command and the receiver (separate processes) meet there.
public final class VerificationLedger: VerificationRequests, @unchecked Sendable {  // reason: a command's (`risc stream verify`), called from one task at a time
    private let connection: SQLiteConnection

    public typealias Entry = VerificationEntry

    public init(directory: String) throws {
        try PrivateFiles.makeDirectory(directory)
        connection = try SQLiteDatabase(directory: directory).connect(.transactions)
    }

    /// Records that a verification carrying `state` was requested.
    public func request(state: String, apiBase: String, now: Double = systemNow()) throws {
        try connection.prepare("INSERT INTO stream_verifications (state, requested_at, api_base) VALUES (?1, ?2, ?3)")
            .run([.text(state), .double(now), .text(apiBase)])
    }

    public func entry(state: String) throws -> Entry? {
        let statement = try connection.prepare(
            "SELECT requested_at, matched_at, jti, kid, alg, iss, aud FROM stream_verifications WHERE state = ?1")
        try statement.bind([.text(state)])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return Entry(
            state: state, requestedAt: statement.double(0), matchedAt: statement.isNull(1) ? nil : statement.double(1),
            tokenID: statement.text(2), keyID: statement.text(3), algorithm: statement.text(4), issuer: statement.text(5),
            audience: statement.text(6))
    }

    /// SETs received since `time`: how many, and how many of them were verification events.
    public func received(since time: Double) throws -> (all: Int, verifications: Int) {
        let statement = try connection.prepare(
            """
            SELECT count(*), coalesce(sum(event_types LIKE '%verification%'), 0) FROM sets WHERE last_received_at >= ?1
            """)
        try statement.bind([.double(time)])
        defer { statement.reset() }
        guard try statement.step() else { return (0, 0) }
        return (Int(statement.int(0)), Int(statement.int(1)))
    }

    /// Verification events: their `state` is matched against the requests `risc stream verify`
    /// recorded, closing the round trip. One event-log line each: `matched` (with the round trip),
    /// `unrequested` (a state we did not ask for, or already answered), or `no_state`; matched at `now`.
    static func records(
        for plan: ActionPlan, claims: SecurityEventToken, id: Int64, jti: String, compact: String, connection: SQLiteConnection, now: Double
    ) throws -> [EventLogRecord] {
        try plan.verificationStates.map { state in
            let requested = try state.flatMap { try match(connection, state: $0, setID: id, token: compact, claims: claims, now: now) }
            return ActionPlan.verificationRecord(jti: jti, state: state, requestedAt: requested, now: now)
        }
    }

    /// Marks the request for `state` as answered by this SET (the first answer wins). Returns the
    /// request time when `state` was one we asked for and had not been answered yet.
    static func match(
        _ connection: SQLiteConnection, state: String, setID: Int64, token: String, claims: SecurityEventToken, now: Double
    ) throws -> Double? {
        let header = (try? CompactJWS(token).header)
        try connection.cached(
            """
            UPDATE stream_verifications SET matched_at = ?2, set_id = ?3, jti = ?4, kid = ?5, alg = ?6, iss = ?7, aud = ?8
            WHERE state = ?1 AND matched_at IS NULL
            """
        ).run([
            .text(state), .double(now), .int(setID), .optional(claims.tokenID), .optional(header?.keyID),
            .optional(header?.algorithm.rawValue), .optional(claims.issuer), .text(claims.audience.joined(separator: " ")),
        ])
        guard connection.changes > 0 else { return nil }
        let requested = try connection.cached("SELECT requested_at FROM stream_verifications WHERE state = ?1")
        try requested.bind([.text(state)])
        defer { requested.reset() }
        return try requested.step() ? requested.double(0) : nil
    }
}
