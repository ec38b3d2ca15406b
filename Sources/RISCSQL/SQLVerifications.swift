public import RISCCore

/// The `state` values `risc stream verify` asked Google to send back, and the verification SETs
/// that carried them, on either driver: the two ends of the round trip, kept in the receiver's
/// store so the command and the receiver (separate processes) meet there. (Matching a SET to its
/// request happens in the transaction that stores or finishes it, in each driver.)
public struct SQLVerifications: VerificationRequests {
    let session: any SQLSession

    public init(session: any SQLSession) { self.session = session }

    public func request(state: String, apiBase: String, now: Double) async throws {
        _ = try await session.transaction([
            ("INSERT INTO stream_verifications (state, requested_at, api_base) VALUES ($1, $2, $3)", [.text(state), .double(now), .text(apiBase)])
        ])
    }

    public func entry(state: String) async throws -> VerificationEntry? {
        try await session.rows("SELECT requested_at, matched_at, jti, kid, alg, iss, aud FROM stream_verifications WHERE state = $1", [.text(state)])
            .first.map {
                VerificationEntry(
                    state: state, requestedAt: $0[0].double ?? 0, matchedAt: $0[1].double, tokenID: $0[2].text, keyID: $0[3].text,
                    algorithm: $0[4].text, issuer: $0[5].text, audience: $0[6].text)
            }
    }

    public func received(since time: Double) async throws -> (all: Int, verifications: Int) {
        let row = try await session.rows(
            "SELECT count(*), coalesce(sum(CASE WHEN event_types LIKE '%verification%' THEN 1 ELSE 0 END), 0) FROM sets WHERE last_received_at >= $1",
            [.double(time)]
        ).first
        return (Int(row?[0].int ?? 0), Int(row?[1].int ?? 0))
    }
}
