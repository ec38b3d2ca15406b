import Foundation
import RISCCore
import RISCSQL

/// Verification SETs matched to the requests `risc stream verify` recorded (`SQLVerifications`),
/// in the transaction that stores or finishes them.
enum VerificationLedger {
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
