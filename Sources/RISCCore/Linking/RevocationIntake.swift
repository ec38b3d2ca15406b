/// What the revocation endpoint does with one call: check it, record it durably as a local
/// `token-revoked` SET (so it goes through the same queue, actions, webhook, retries and event
/// log as Google's SETs), then answer. RFC 7009 §2.2: 200 whether the token was revoked, was
/// already revoked or is unknown; the record is on disk before the 200.
///
/// The record is idempotent: its `jti` is derived from the token's fingerprint, so a repeated
/// call is a duplicate (200 again, applied once). The token itself is never stored or logged:
/// only `hash_base64_sha512_sha512`, which is what the store matches linked tokens by.
public struct RevocationIntake: Sendable {
    public let policy: RevocationPolicy
    public let store: any EventStore
    public let log: any EventLog
    /// Counts the actions the store applied inline for a call.
    public let metrics: (any WorkMetrics)?
    /// Signs local records (`LocalSET`).
    let signingKey: [UInt8]
    let clock: @Sendable () -> Double

    public init(
        policy: RevocationPolicy, store: any EventStore, log: any EventLog, metrics: (any WorkMetrics)? = nil, signingKey: [UInt8],
        clock: @escaping @Sendable () -> Double
    ) {
        self.metrics = metrics
        self.policy = policy
        self.store = store
        self.log = log
        self.signingKey = signingKey
        self.clock = clock
    }

    /// The answer to send.
    public struct Answer: Sendable {
        public let status: Int
        public let headers: [(String, String)]
        public let body: String?
        /// The event-log line of a refused call (the endpoint samples and writes it); nil when
        /// the call was logged here.
        public let refusal: EventLogRecord?
    }

    /// A body in a content or transfer coding risc does not decode: not a malformed call (a 400
    /// tells Google not to make it again, and the unlink would be lost) but a 415 or 501 naming the
    /// coding. A body that is form text all the same (printable ASCII) is read as it is.
    static func checkCodings(body: [UInt8], contentEncoding: String?, transferCodings: String?) throws(RevocationError) {
        guard let coding = Intake.UndecodedCoding(body: body, contentEncoding: contentEncoding, transferCodings: transferCodings, isText: { (0x20...0x7E).contains($0) })
        else { return }
        let advice = coding.transfer ? "send the form chunked or with a Content-Length" : "send the form as it is"
        throw RevocationError(
            status: coding.status, code: "invalid_request", description: "\(coding.transfer ? "Transfer" : "Content")-Encoding \(coding.name) is not supported: \(advice)")
    }

    /// Handles one call; `completion` runs once, on the store's thread for a stored record.
    public func receive(
        body: [UInt8], contentType: String?, authorization: String?, contentEncoding: String? = nil, transferCodings: String? = nil, remote: String?,
        retryAfter: Int, completion: @escaping @Sendable (Answer) -> Void
    ) {
        let start = clock()
        var record = EventLogRecord(step: .received, outcome: .accepted, time: start)
        record["source"] = "revocation_endpoint"
        if let remote { record["remote"] = .string(remote) }
        let request: RevocationRequest
        do {
            try Self.checkCodings(body: body, contentEncoding: contentEncoding, transferCodings: transferCodings)
            request = try RevocationRequest.parse(body: body, contentType: contentType, authorization: authorization)
            try policy.check(request)
        } catch {
            record.outcome = .rejected
            record["error"] = .string(error.code)
            record["description"] = .string(error.description)
            record["http_status"] = .number(Double(error.status))
            var headers = Self.noStore + [("Content-Type", "application/json;charset=UTF-8")]
            if error.status == 401 { headers.append(("WWW-Authenticate", #"Basic realm="risc""#)) }
            if error.status == 415 { headers.append(("Accept-Encoding", "identity")) }  // the codings that would do (RFC 9110 §15.5.16)
            return completion(Answer(status: error.status, headers: headers, body: error.body, refusal: record))
        }
        let stored: SETRecord
        do {
            stored = try LocalSET.revocation(
                tokenHash: SHA512.doubleHashBase64(request.token), tokenTypeHint: request.tokenTypeHint, clientID: request.clientID, now: start,
                remote: remote, key: signingKey)
        } catch {
            return completion(failure(&record, error, start: start, retryAfter: retryAfter))
        }
        record["jti"] = .string(stored.tokenID)
        record["events"] = ["token-revoked"]
        record["client_auth"] = .string(request.method)
        if let hint = request.tokenTypeHint { record["token_type_hint"] = .string(Printable.safe(hint, maxBytes: 40)) }
        store.appendReporting(stored) { [record] result in
            var record = record
            switch result {
            case .failure(let error):
                completion(failure(&record, error, start: start, retryAfter: retryAfter))
            case .success(let (outcome, followUp)):
                if case .duplicate(_, let deliveries) = outcome {
                    record.outcome = .duplicate
                    record["deliveries"] = .number(Double(deliveries))
                }
                record.latency = clock() - start
                log.record(record)
                log.record(followUp, metrics: metrics)
                completion(Answer(status: 200, headers: Self.noStore, body: nil, refusal: nil))
            }
        }
    }

    private func failure(_ record: inout EventLogRecord, _ error: any Error, start: Double, retryAfter: Int) -> Answer {
        record.outcome = .failed
        record["error"] = .string(String(describing: error).prefix(300).description)
        record.latency = clock() - start
        log.record(record)
        let body = JSONValue.object([
            "error": "temporarily_unavailable", "error_description": "the revocation cannot be recorded right now; try again",
        ]).serialized
        return Answer(
            status: 503, headers: Self.noStore + [("Content-Type", "application/json;charset=UTF-8"), ("Retry-After", String(retryAfter))],
            body: body, refusal: nil)
    }

    static let noStore = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]
}

/// Records risc makes itself and keeps in the SET queue beside the issuers' SETs: a call to the
/// revocation endpoint is stored as a `token-revoked` SET from `revocationIssuer`. Signed with
/// HS256 under a key of the receiver's (derived from the token-fingerprint key) only because a
/// stored token is a compact JWS; no receiver accepts HS256 or that issuer, so such a record can
/// never pass as, or be replayed as, an issuer's SET.
public enum LocalSET {
    /// The issuer (and de-duplication scope) of revocation-endpoint records.
    public static let revocationIssuer = "urn:risc:revocation-endpoint"
    /// The `kid` of every local record's header.
    public static let keyID = "risc-local"

    /// The HS256 key for local records, from the token-fingerprint key.
    public static func signingKey(tokenKey: [UInt8]) -> [UInt8] {
        HMACSHA256.mac(key: tokenKey, data: Array("risc local records v1".utf8))
    }

    /// The stored record of one revocation call.
    public static func revocation(
        tokenHash: String, tokenTypeHint: String?, clientID: String, now: Double, remote: String?, key: [UInt8]
    ) throws -> SETRecord {
        let type = tokenTypeHint.flatMap { RevocationPolicy.knownTokenTypes.contains($0) ? $0 : nil } ?? "unknown"
        let subject: JSONObject = [
            "subject_type": "oauth_token", "token_type": .string(type),
            "token_identifier_alg": .string(OAuthTokenIdentifier.Algorithm.hashSHA512SHA512.rawValue),
            "token": .string(tokenHash),
        ]
        let claims: JSONObject = [
            "iss": .string(revocationIssuer), "aud": .string(clientID), "iat": .number(now.rounded(.down)),
            "jti": .string("revocation-" + SHA256.hex(Array(tokenHash.utf8)).prefix(32)),
            "events": .object([EventType.tokenRevoked.uri: .object(["subject": .object(subject)])]),
        ]
        let header: JSONObject = ["alg": "HS256", "typ": "secevent+jwt", "kid": .string(keyID)]
        let payload = Array(JSONValue.object(claims).serialized.utf8)
        let input = Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "." + Base64URL.encode(payload)
        let compact = input + "." + Base64URL.encode(HMACSHA256.mac(key: key, data: Array(input.utf8)))
        // Its claims are its own: nothing to verify.
        let token = try SecurityEventToken(payload: payload)
        return SETRecord(
            issuer: revocationIssuer, claimedIssuer: revocationIssuer, tokenID: token.tokenID ?? "", issuedAt: token.issuedAt ?? now,
            receivedAt: now, remoteAddress: remote, contentType: "application/x-www-form-urlencoded", token: compact, claims: token)
    }
}
