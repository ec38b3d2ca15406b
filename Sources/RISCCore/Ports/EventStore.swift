/// A verified SET as it is kept: the raw token for audit plus what the queue and operators need.
public struct SETRecord: Sendable {
    /// The fields, in one object: a record is handed from the event loop to the store's writer
    /// and copied into batches and completions on the way, and a copy is then one reference
    /// count, not one for each string, array and claim.
    private final class Fields: Sendable {
        let issuer: String, claimedIssuer: String, tokenID: String
        let issuedAt: Double, receivedAt: Double
        let remoteAddress: String?, contentType: String?
        let eventTypes: [String]
        let subjectsJSON: String
        let token: String
        let claims: SecurityEventToken

        init(
            issuer: String, claimedIssuer: String, tokenID: String, issuedAt: Double, receivedAt: Double, remoteAddress: String?,
            contentType: String?, token: String, claims: SecurityEventToken
        ) {
            self.issuer = issuer
            self.claimedIssuer = claimedIssuer
            self.tokenID = tokenID
            self.issuedAt = issuedAt
            self.receivedAt = receivedAt
            self.remoteAddress = remoteAddress
            self.contentType = contentType
            eventTypes = claims.events.map(\.type.uri)
            subjectsJSON = JSONValue.array(claims.events.map { $0.subject?.json ?? .null }).serialized
            self.token = token
            self.claims = claims
        }
    }
    private let fields: Fields

    /// The de-duplication scope: the key set's issuer, without a trailing `/`.
    public var issuer: String { fields.issuer }
    /// `iss` exactly as the token says.
    public var claimedIssuer: String { fields.claimedIssuer }
    public var tokenID: String { fields.tokenID }
    public var issuedAt: Double { fields.issuedAt }
    public var receivedAt: Double { fields.receivedAt }
    public var remoteAddress: String? { fields.remoteAddress }
    public var contentType: String? { fields.contentType }
    /// Event type URIs, in token order.
    public var eventTypes: [String] { fields.eventTypes }
    /// The subjects, as JSON (`Subject.json`), one per event.
    public var subjectsJSON: String { fields.subjectsJSON }
    /// The compact JWS as received (stored for audit; never logged).
    public var token: String { fields.token }
    /// The verified claims, so the store can plan actions without parsing the token again.
    public var claims: SecurityEventToken { fields.claims }

    public init(validated: ValidatedSET, token: String, receivedAt: Double, remoteAddress: String?, contentType: String?) {
        self.init(
            issuer: SETPolicy.issuerScope(validated.keyIssuer), claimedIssuer: validated.issuer, tokenID: validated.tokenID,
            issuedAt: validated.issuedAt, receivedAt: receivedAt, remoteAddress: remoteAddress, contentType: contentType, token: token,
            claims: validated.token)
    }

    /// Event types and subjects are taken from `claims` (verified before: a record read back from
    /// the embedded store's journal).
    public init(
        issuer: String, claimedIssuer: String, tokenID: String, issuedAt: Double, receivedAt: Double, remoteAddress: String?,
        contentType: String?, token: String, claims: SecurityEventToken
    ) {
        fields = Fields(
            issuer: issuer, claimedIssuer: claimedIssuer, tokenID: tokenID, issuedAt: issuedAt, receivedAt: receivedAt,
            remoteAddress: remoteAddress, contentType: contentType, token: token, claims: claims)
    }
}

/// What storing a SET did.
public enum AppendOutcome: Sendable, Equatable {
    /// First delivery: stored, queued for processing.
    case accepted(id: Int64)
    /// Seen before (same issuer and `jti`): not stored again; `deliveries` counts this one too.
    case duplicate(id: Int64, deliveries: Int64)
    /// Durable in the embedded store's journal, answered before it is indexed (whether it repeats
    /// a stored SET is known then: `JournalingStore`).
    case journaled
}

/// Durable storage of received SETs. `append` returns only once the record is on disk
/// (RFC 8935 §2.2: the 202 means the SET is safe).
public protocol EventStore: Sendable {
    /// Stores `record` durably, or counts a redelivery of the same (issuer, jti).
    /// - Throws: an error of the store's own (disk full, I/O) — a temporary failure.
    func append(_ record: SETRecord) async throws -> AppendOutcome

    /// As `append`, also returning event-log lines for what the store did with the SET in the same
    /// transaction (actions applied inline), for the caller to log after its own `received` line.
    func appendReporting(_ record: SETRecord) async throws -> (outcome: AppendOutcome, followUp: [EventLogRecord])

    /// As `appendReporting`, calling `completion` (on a thread of the store's) instead of resuming
    /// a task: the push endpoint's path, with no hop through the concurrency pool.
    func appendReporting(_ record: SETRecord, completion: @escaping @Sendable (StoreResult) -> Void)
}

/// A store that can make a pushed SET durable before it stores it in its index (the embedded
/// store's journal: written by the event loop that read it, synced for every loop at once, and
/// answered with one hop a batch instead of one a SET), indexing it behind.
public protocol JournalingStore: EventStore {
    /// Takes `record` into the journal of the calling event loop's current pass (flushed through
    /// `hop`): `durable` once it is on disk (answer then), `indexed` once the index holds it, with
    /// what `appendReporting` reports. False: not taken (no journal, or the index is behind or
    /// failing): store it the ordinary way.
    func journal(
        _ record: SETRecord, hop: @escaping Intake.Hop, durable: @escaping @Sendable (Result<Void, StoreError>) -> Void,
        indexed: @escaping @Sendable (StoreResult) -> Void
    ) -> Bool
}

/// What `EventStore.appendReporting(_:completion:)` reports.
public typealias StoreResult = Result<(outcome: AppendOutcome, followUp: [EventLogRecord]), any Error>

extension EventStore {
    public func appendReporting(_ record: SETRecord) async throws -> (outcome: AppendOutcome, followUp: [EventLogRecord]) {
        (try await append(record), [])
    }

    public func appendReporting(_ record: SETRecord, completion: @escaping @Sendable (StoreResult) -> Void) {
        Task {
            do { completion(.success(try await appendReporting(record))) } catch { completion(.failure(error)) }
        }
    }
}
