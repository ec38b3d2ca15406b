import Synchronization

/// What the push endpoint does with one POSTed body: verify, store durably, report.
///
/// RFC 8935 §2: "the SET Recipient … SHALL validate" then, on success, respond 202 — risc answers
/// 202 only after `EventStore.append` returned, so the SET is on disk. Every outcome appends one
/// line to the event log and one observation to the metrics.
public struct Intake: Sendable {
    /// Whom it receives from, by path.
    public let transmitters: Transmitters
    public let store: any EventStore
    /// `store` when it journals pushed SETs (the embedded store): cast once, not for every SET.
    let journaling: (any JournalingStore)?
    public let log: any EventLog
    public let metrics: (any IntakeMetrics)?
    /// When set, the log lines of refused requests (400) and of requests we could not take (503)
    /// are sampled through it (they are always counted).
    public var rejections: RejectionSampler?
    /// The verification requests risc made: an SSF transmitter's verification event echoing a
    /// `state` not among them is refused `invalid_state` (SSF 1.0 §8.1.4.2). Nil: not checked.
    public var verifications: (any VerificationRequests)?
    /// The stream id risc knows for a transmitter (by name), if any: an SSF verification event
    /// whose `sub_id` names another stream is refused (the conformance suite's `verification-wrong-subject`).
    public var knownStream: (@Sendable (String) -> String?)?
    let clock: @Sendable () -> Double

    /// One transmitter, Google's dialect, on every path the caller routes here.
    public init(
        verifier: SETVerifier, store: any EventStore, log: any EventLog, metrics: (any IntakeMetrics)? = nil,
        clock: @escaping @Sendable () -> Double
    ) {
        let google = Transmitter(name: "google", dialect: .google, issuer: nil, verifier: verifier)
        self.init(transmitters: Transmitters([google], sharedPath: nil), store: store, log: log, metrics: metrics, clock: clock)
    }

    public init(
        transmitters: Transmitters, store: any EventStore, log: any EventLog, metrics: (any IntakeMetrics)? = nil,
        clock: @escaping @Sendable () -> Double
    ) {
        self.transmitters = transmitters
        self.store = store
        journaling = store as? any JournalingStore
        self.log = log
        self.metrics = metrics
        self.clock = clock
    }

    /// Where a request came from and how it was labelled.
    public struct Delivery: Sendable {
        public let body: [UInt8]
        public let remoteAddress: String?
        public let contentType: String?
        /// The push path it came to (nil: any transmitter may have sent it, as in `risc replay`).
        public let path: String?
        /// Its `Authorization` header, checked against the transmitter's when it has one.
        public let authorization: String?
        /// Fetched by risc's poller (RFC 8936) over an authenticated call, under this member name of
        /// the poll answer's `sets` (its `jti` there, logged until the SET's own is read): no push
        /// credential to check.
        public let polledAs: String?
        /// Its `Content-Encoding` header: risc decodes none, so any but `identity` is refused (415).
        public let contentEncoding: String?
        /// Its transfer codings besides `chunked` (which the HTTP decoder takes off): risc decodes
        /// none, so any is refused (501, RFC 9112 §6.1).
        public let transferCodings: String?
        public init(
            body: [UInt8], remoteAddress: String?, contentType: String?, path: String? = nil, authorization: String? = nil, polledAs: String? = nil,
            contentEncoding: String? = nil, transferCodings: String? = nil
        ) {
            self.body = body
            self.remoteAddress = remoteAddress
            self.contentType = contentType
            self.path = path
            self.authorization = authorization
            self.polledAs = polledAs
            self.contentEncoding = contentEncoding
            self.transferCodings = transferCodings
        }

        /// A body in a content or transfer coding risc does not decode: not an invalid SET (a 400
        /// would tell the transmitter not to send it again, RFC 8935 §2.3) but a 415 (content) or
        /// 501 (transfer, RFC 9112 §6.1) naming the coding. A body that is compact-JWS text all the
        /// same (a label wrongly added on the way) is read as it is, as the Content-Type is not
        /// relied on either.
        func checkEncoding() throws(SETError) {
            guard let coding = UndecodedCoding(body: body, contentEncoding: contentEncoding, transferCodings: transferCodings, isText: Self.isCompactText)
            else { return }
            var error = SETError.invalidRequest(
                coding.transfer
                    ? "Transfer-Encoding \(coding.name) is not supported: send the SET chunked or with a Content-Length"
                    : "Content-Encoding \(coding.name) is not supported: send the SET as it is, with no content coding")
            error.status = coding.status
            error.logFields["http_status"] = .number(Double(error.status))
            throw error
        }

        /// base64url, the dots between the parts, and the white space around a token.
        static func isCompactText(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"): true
            default: false
            }
        }
    }

    /// A body in a content or transfer coding risc does not decode, which either endpoint answers
    /// 415 (content, RFC 9110 §15.5.16) or 501 (transfer, RFC 9112 §6.1) naming the coding, not with
    /// a 400 that would tell the sender not to send it again.
    struct UndecodedCoding {
        /// The coding as sent (bounded), and whether it is a transfer coding.
        let name: String
        let transfer: Bool
        var status: Int { transfer ? 501 : 415 }

        /// Nil when the body is to be read as it is: no coding but `identity` and `chunked`, or a
        /// body whose every byte `isText` takes (a label wrongly added on the way).
        init?(body: [UInt8], contentEncoding: String?, transferCodings: String?, isText: (UInt8) -> Bool) {
            let content = contentEncoding.map { Substring($0).trimmingSpaces.lowercased() }.flatMap { $0.isEmpty || $0 == "identity" ? nil : $0 }
            guard let coding = transferCodings ?? content, body.contains(where: { !isText($0) }) else { return nil }
            (name, transfer) = (Printable.safe(coding, maxBytes: 60), transferCodings != nil)
        }
    }

    /// Whose rules a delivery is verified by, its credential checked: the path's one transmitter
    /// (its `Authorization` checked before the body is read), or of several sharing the path the
    /// one its unverified `iss` names.
    func admit(_ delivery: Delivery) throws(SETError) -> (Transmitter, CompactJWS) {
        let candidates = transmitters.candidates(on: delivery.path)
        guard let only = candidates.first else { throw .invalidRequest("no transmitter is configured for this path") }
        // Several on the path: the body is split first, to read its unverified `iss`.
        let shared = candidates.count > 1 ? try SETVerifier.structure(delivery.body) : nil
        let transmitter = if let shared { try Transmitters.pick(candidates, shared) } else { only }
        // A push credential is checked before a lone transmitter's body is read at all.
        if delivery.polledAs == nil { try transmitter.authenticate(delivery.authorization) }
        if let shared { return (transmitter, shared) }
        return (transmitter, try SETVerifier.structure(delivery.body))
    }

    /// Receives one delivery.
    ///
    /// - Returns: `.accepted` or `.duplicate`: answer 202.
    /// - Throws: `SETError` (answer 400) after logging `rejected`; `KeyUnavailableError` or a
    ///   store error (answer 503) after logging `failed`.
    public func receive(_ delivery: Delivery) async throws -> AppendOutcome {
        try await withCheckedThrowingContinuation { continuation in
            receive(delivery) { continuation.resume(with: $0) }
        }
    }

    /// Runs a piece of work somewhere else (an event loop), so the store's writer thread only
    /// hands results over.
    public typealias Hop = @Sendable (@escaping @Sendable () -> Void) -> Void

    /// As `receive(_:)`, reporting to `completion` instead: on the calling thread for a refusal;
    /// once stored, through `hop` (or on the store's thread without one), where the event-log line
    /// is also written. With the signing key held (the common case) nothing here waits: the push
    /// endpoint verifies on its event loop and answers from the store's callback. A key that must
    /// be fetched first sends the request through a task.
    public func receive(
        _ delivery: Delivery, hop: Hop? = nil, completion: @escaping @Sendable (Result<AppendOutcome, any Error>) -> Void
    ) {
        let start = clock()
        var record = Self.received(delivery, at: start)
        let parsed: CompactJWS
        let transmitter: Transmitter
        do {
            try delivery.checkEncoding()
            let (admitted, jws) = try admit(delivery)
            transmitter = admitted
            if transmitters.all.count > 1 { record["transmitter"] = .string(transmitter.name) }
            switch try transmitter.verifier.verifyWithHeldKey(parsed: jws, now: start) {
            case .verified(let validated):
                checkState(validated, transmitter, delivery, record, start: start, hop: hop, completion: completion)
                return
            case .keyNotHeld(let jws):
                parsed = jws
            }
        } catch {
            refuse(error, &record, start: start, completion: completion)
            return
        }
        Task { [record] in
            var record = record
            do {
                let validated = try await transmitter.verifier.verify(parsed, now: start)
                checkState(validated, transmitter, delivery, record, start: start, hop: hop, completion: completion)
            } catch {
                refuse(error, &record, start: start, completion: completion)
            }
        }
    }

    /// Refuses a delivery before it is read (a poll answer's member that is no SET): logged and
    /// counted as `receive` would.
    public func refuse(_ delivery: Delivery, _ error: SETError) {
        let start = clock()
        var record = Self.received(delivery, at: start)
        refuse(error, &record, start: start) { _ in }
    }

    /// The `received` line a delivery starts with.
    private static func received(_ delivery: Delivery, at start: Double) -> EventLogRecord {
        var record = EventLogRecord(step: .received, outcome: .accepted, time: start)
        if let remote = delivery.remoteAddress { record["remote"] = .string(remote) }
        if let type = delivery.contentType, type.lowercased() != "application/secevent+jwt" {
            record["content_type"] = .string(Printable.safe(type, maxBytes: 100))
        }
        if let name = delivery.polledAs { record["jti"] = .string(Printable.safe(name, maxBytes: 200)) }
        return record
    }

    private func refuse(
        _ error: any Error, _ record: inout EventLogRecord, start: Double,
        completion: @Sendable (Result<AppendOutcome, any Error>) -> Void
    ) {
        if let error = error as? SETError {
            let end = clock()
            record.outcome = .rejected
            record["err"] = .string(error.code.rawValue)
            record["description"] = .string(error.description)
            for (name, value) in error.logFields where record[name] == nil { record[name] = value }
            record.latency = end - start
            if rejections?.admit(record["remote"]?.stringValue, outcome: "rejected", now: end) ?? true { log.record(record) }
            metrics?.observe(outcome: "rejected", err: error.code.rawValue, verifySeconds: end - start, commitSeconds: nil)
        } else {
            fail(&record, error, start: start, verifySeconds: nil)
        }
        completion(.failure(error))
    }

    /// SSF's verification events that echo a `state`: refused `invalid_state` unless risc asked
    /// for that state (a transmitter-initiated one, without `state`, is accepted). Google's
    /// dialect is not checked here: its unrequested states are logged as such, as before.
    private func checkState(
        _ validated: ValidatedSET, _ transmitter: Transmitter, _ delivery: Delivery, _ received: EventLogRecord, start: Double, hop: Hop?,
        completion: @escaping @Sendable (Result<AppendOutcome, any Error>) -> Void
    ) {
        guard transmitter.dialect == .ssf else { return store(validated, delivery, received, start: start, hop: hop, completion: completion) }
        let verificationEvents = validated.events.filter { $0.type.canonical == .ssfVerification }
        if !verificationEvents.isEmpty, let stream = knownStream?(transmitter.name),
            verificationEvents.contains(where: { event in event.subject.map { $0 != .opaque(id: stream) } ?? false })
        {
            var record = received
            return refuse(SETError(.invalidRequest, "the verification event names another stream than this receiver's"), &record, start: start, completion: completion)
        }
        let states = verificationEvents.compactMap(\.state)
        guard let verifications, !states.isEmpty else {
            return store(validated, delivery, received, start: start, hop: hop, completion: completion)
        }
        Task {
            var record = received
            do {
                for state in states where try await verifications.entry(state: state) == nil {
                    var error = SETError(.invalidState, "the verification event's state is not one this receiver asked for")
                    error.logFields["jti"] = .string(validated.tokenID)
                    return refuse(error, &record, start: start, completion: completion)
                }
            } catch {
                fail(&record, error, start: start, verifySeconds: nil)
                return completion(.failure(error))
            }
            store(validated, delivery, received, start: start, hop: hop, completion: completion)
        }
    }

    private func store(
        _ validated: ValidatedSET, _ delivery: Delivery, _ received: EventLogRecord, start: Double, hop: Hop?,
        completion: @escaping @Sendable (Result<AppendOutcome, any Error>) -> Void
    ) {
        let verified = clock()
        var record = received
        Self.describe(&record, validated.token, jti: validated.tokenID, iss: validated.issuer)
        if !validated.warnings.isEmpty { record["warnings"] = .array(validated.warnings.map { .string($0) }) }
        let stored = SETRecord(
            validated: validated, token: String(decoding: delivery.body[SETVerifier.trimmedRange(delivery.body)], as: UTF8.self),
            receivedAt: start, remoteAddress: delivery.remoteAddress, contentType: delivery.contentType)
        // The embedded store's journal: written on this event loop, answered on it once synced, indexed
        // behind. The SET's commit time and its line's latency end when it was durable, not when the
        // index took it (up to the writer's linger later).
        if let hop, let journal = journaling {
            let durableAt = DurableTime()
            let taken = journal.journal(
                stored, hop: hop,
                durable: { [record] result in
                    guard case .failure(let error) = result else {
                        durableAt.set(clock())
                        return completion(.success(.journaled))
                    }
                    var record = record
                    fail(&record, error, start: start, verifySeconds: verified - start)
                    completion(.failure(error))
                },
                indexed: { [record] result in
                    // Its answer went when it was durable; a failure here is logged (the record
                    // stays in the journal, indexed at the next start).
                    report(result, record, start: start, verified: verified, durable: durableAt.value) { _ in }
                })
            if taken { return }
        }
        store.appendReporting(stored) { [record] result in
            guard let hop else { return report(result, record, start: start, verified: verified, completion: completion) }
            hop { report(result, record, start: start, verified: verified, completion: completion) }
        }
    }

    /// `durable`: when the SET was on disk, if that came before its index held it (the journal);
    /// its commit time and its line's latency end there.
    private func report(
        _ result: StoreResult, _ received: EventLogRecord, start: Double, verified: Double, durable: Double? = nil,
        completion: @Sendable (Result<AppendOutcome, any Error>) -> Void
    ) {
        var record = received
        switch result {
        case .failure(let error):
            fail(&record, error, start: start, verifySeconds: verified - start)
            completion(.failure(error))
        case .success(let (outcome, followUp)):
            let end = durable ?? clock()
            if case .duplicate(_, let deliveries) = outcome {
                record.outcome = .duplicate
                record["deliveries"] = .number(Double(deliveries))
            }
            record.latency = end - start
            log.record(record)
            log.record(followUp, metrics: metrics)
            metrics?.observe(
                outcome: record.outcome.rawValue, err: nil, verifySeconds: verified - start,
                commitSeconds: end - verified)
            completion(.success(outcome))
        }
    }

    /// The fields of a stored SET's `received` line (also written for one the embedded store
    /// recovers from its journal at a start).
    public static func describe(_ record: inout EventLogRecord, _ token: SecurityEventToken, jti: String, iss: String) {
        record["jti"] = .string(jti)
        record["iss"] = .string(iss)
        record["events"] = .array(token.events.map { .string($0.type.shortName) })
        let subjects = token.events.compactMap { $0.subject?.googleSubject?.subject }
        if let first = subjects.first { record["subject"] = .string(first) }
        // SSF's correlation of SETs from one happening, and when it happened (CAEP), when sent.
        if let txn = token.transactionID { record["txn"] = .string(Printable.safe(txn, maxBytes: 200)) }
        if let time = token.events.lazy.compactMap(\.eventTimestamp).first { record["event_time"] = .string(Timestamp.iso8601(time)) }
    }

    private func fail(_ record: inout EventLogRecord, _ error: any Error, start: Double, verifySeconds: Double?) {
        let end = clock()
        record.outcome = .failed
        record["error"] = .string(String(describing: error).prefix(300).description)
        record.latency = end - start
        // A 503 is a refusal too: sampled like the 400s (a flood during an outage wrote 196,360
        // lines in 10 s before), always counted; the outage itself is logged when it starts and ends.
        if rejections?.admit(record["remote"]?.stringValue, outcome: "failed", now: end) ?? true { log.record(record) }
        metrics?.observe(outcome: "failed", err: nil, verifySeconds: verifySeconds, commitSeconds: nil)
    }

}

/// When a journaled SET became durable: set by the journal's `durable` callback, read by its
/// `indexed` one, which follows it (one a SET).
private final class DurableTime: Sendable {
    /// A NaN's bit pattern until `set`: no clock reads one.
    private static let unset = UInt64.max
    private let bits = Atomic<UInt64>(DurableTime.unset)
    func set(_ time: Double) { bits.store(time.bitPattern, ordering: .releasing) }
    /// Nil until `set`.
    var value: Double? {
        let bits = bits.load(ordering: .acquiring)
        return bits == Self.unset ? nil : Double(bitPattern: bits)
    }
}
