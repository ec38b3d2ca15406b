import Foundation
import Hummingbird
import Logging
import NIOCore
import RISCCore
import RISCStorage

/// The admin listener's account API, for the site's login and linking servers to register
/// accounts, sessions and issued tokens as they happen. Every request needs
/// `Authorization: Bearer <admin token>`; without a configured token the API is off.
///
/// - `POST /admin/accounts` `{"subject", "user_id", "email"?, "issuer"?, "sessions"?, "refresh_tokens"?, "linked_tokens"?}` → 201
/// - `POST /admin/accounts/{subject}/sessions` `{"session_id", "via_google"?, "issuer"?, "created_at"?}` → 201, 404 unknown account
/// - `POST /admin/accounts/{subject}/tokens` `{"token", "kind": "google_refresh" | "linked", "issuer"?}` → 201, 404
/// - `GET /admin/accounts/{subject}[?issuer=…]` → 200 with the account, 404
/// - `DELETE /admin/accounts/{subject}[?issuer=…]` → 200 `{"unlinked": n}` with its sessions and tokens, 404; when
///   `linking.notices` is on, an unlink notice is queued per active linked token and the answer adds `"notices_queued": k`
/// - `POST /admin/accounts/{subject}/linked-tokens/revoke` `{"tokens"?: [raw], "token_hashes"?: [fingerprint],
///   "token_type"?, "issuer"?}` → 200 `{"revoked", "notices_queued", "not_found"}`: the site revoked these linked
///   tokens (all of the account's when neither list is given); marked revoked, and a notice queued for each, 404
///
/// With `linking.google_client_id`, also the App Flip check (`AppFlip.check`):
/// - `POST /admin/linking/app-flip` `{"url", "outcome"?: "approve" | "deny" | "cancel", "code"?, "user_id"?}` →
///   200 `{"acceptable", "error", "reason", "redirect"}` (`redirect` null: the redirect_uri is not to be trusted)
struct AdminAccountsController: Sendable {
    let accounts: any AccountRepository
    let token: [UInt8]
    var appFlip: AppFlipPolicy? = nil
    /// Queues unlink notices for linked tokens the site revokes; nil: notices are off.
    var notices: UnlinkNotices? = nil
    var log: (any EventLog)? = nil
    /// The receiver's clock: the times the API records (accounts, sessions and tokens created,
    /// unlinks, revocations), which the ordering rule compares with SETs' times.
    var clock: @Sendable () -> Double = systemNow
    /// Seconds in Retry-After when the store fails (`retry_after`), and where its failures are logged.
    var retryAfter = 30
    var logger: Logger? = nil

    func register(on router: Router<RISCRequestContext>) {
        router.post("/admin/accounts") { request, context in try await guarded(request) { try await link(request) } }
        router.post("/admin/accounts/:subject/sessions") { request, context in
            try await guarded(request) { try await add(request, context, session: true) }
        }
        router.post("/admin/accounts/:subject/tokens") { request, context in
            try await guarded(request) { try await add(request, context, session: false) }
        }
        router.delete("/admin/accounts/:subject") { request, context in
            try await guarded(request) {
                let subject = try Self.subject(context)
                let issuer = try Self.queryIssuer(request)
                let now = clock()
                let (removed, queued) = try await accounts.unlink(subject: subject, issuer: issuer, notices: notices, now: now)
                guard removed > 0 else { return Responses.json(#"{"error":"not_found"}"#, status: .notFound) }
                record(.unlinked, subject: subject, now: now, ["notices_queued": .number(Double(queued))])
                // `notices_queued` only where notices are on: the answer is unchanged for sites without them.
                return Responses.json(
                    notices == nil ? #"{"unlinked":\#(removed)}"# : #"{"unlinked":\#(removed),"notices_queued":\#(queued)}"#, status: .ok)
            }
        }
        router.post("/admin/accounts/:subject/linked-tokens/revoke") { request, context in
            try await guarded(request) { try await revokeLinked(request, context) }
        }
        if let appFlip {
            router.post("/admin/linking/app-flip") { request, context in
                try await guarded(request) {
                    let body = try await Body(request, known: ["url", "outcome", "code", "user_id"], upTo: 16_384)
                    guard let url = try body.string("url") else { throw BadRequest(description: "expected {\"url\": …}") }
                    guard let outcome = AppFlipOutcome(rawValue: try body.string("outcome") ?? "approve") else {
                        throw BadRequest(description: "outcome: approve, deny or cancel")
                    }
                    var suspended = false
                    if let user = try body.string("user_id") { suspended = try await accounts.googleSignInSuspended(userID: user) }
                    let verdict = AppFlip.check(url, policy: appFlip, outcome: outcome, code: try body.string("code"), accountSuspended: suspended)
                    return Responses.json(verdict.json.serialized, status: .ok)
                }
            }
        }
        router.get("/admin/accounts/:subject") { request, context in
            try await guarded(request) {
                let scope = try Self.queryIssuer(request).map(SETPolicy.issuerScope)
                guard let account = try await accounts.accounts(subject: try Self.subject(context)).first(where: { scope == nil || $0.issuer == scope })
                else {
                    return Responses.json(#"{"error":"not_found"}"#, status: .notFound)
                }
                return Responses.json(account.json.serialized, status: .ok)
            }
        }
    }

    /// The `{subject}` of the path, percent-decoded once (a subject the API accepted in a body is
    /// reachable by its path however it is spelt). Malformed encoding or a NUL: 400.
    static func subject(_ context: RISCRequestContext) throws -> String {
        guard let raw = context.parameters.get("subject"), let subject = raw.removingPercentEncoding, !subject.isEmpty else {
            throw BadRequest(description: "the path's subject is not valid percent-encoded text")
        }
        guard !subject.utf8.contains(0) else { throw BadRequest(description: "the subject must not hold a NUL character") }
        return subject
    }

    /// The query's `issuer`, read as strictly as a body: no other parameter (a misspelt `isuer`
    /// must not widen a DELETE to every issuer), given once, checked as linking checks it.
    static func queryIssuer(_ request: Request) throws -> String? {
        let query = request.uri.queryParameters
        if let unknown = query.map({ String($0.key) }).filter({ $0 != "issuer" }).sorted().first {
            throw BadRequest(description: "unknown query parameter '\(Printable.safe(unknown, maxBytes: 64))' (known: issuer)")
        }
        let issuers = query.getAll("issuer")
        guard issuers.count <= 1 else { throw BadRequest(description: "'issuer' given twice") }
        guard let issuer = issuers.first else { return nil }
        return try checkedIssuer(issuer)
    }

    /// `issuer` checked as linking checks it (not empty, no white space around it), as a 400.
    static func checkedIssuer(_ issuer: String) throws -> String {
        do { try AccountLink.check(issuer, named: "'issuer'") } catch { throw BadRequest(description: error.description) }
        return issuer
    }

    /// Whether `Authorization` holds the admin token: SHA-256 digests of both compared in constant
    /// time, so neither the token's length nor where a guess first differs shows in the timing.
    func authorized(_ header: String?) -> Bool {
        guard !token.isEmpty else { return false }
        let offered = PushCredential.normalized(header ?? "")  // "bearer", "Bearer  ": RFC 9110 §11.1
        return TokenFingerprint.constantTimeEquals(SHA256.hash(Array(offered.utf8)), SHA256.hash(Array("bearer ".utf8) + token))
    }

    private func guarded(_ request: Request, _ body: () async throws -> Response) async throws -> Response {
        guard authorized(request.headers[.authorization]) else {
            return Responses.json(#"{"error":"unauthorized"}"#, status: .unauthorized, extra: [.wwwAuthenticate: "Bearer"])
        }
        do {
            return try await body()
        } catch let error as BadRequest {
            return Responses.json(JSONValue.object(["error": "invalid_request", "description": .string(error.description)]).serialized, status: .badRequest)
        } catch let error as HTTPError {
            throw error  // the request's own (a body over the limit: 413)
        } catch {
            // The store's failure, ours and temporary: 503 with a JSON error, as a SET gets, not
            // Hummingbird's bare 500. A driver's words go to the log only.
            let description = (error as? StoreError)?.description ?? "the account store failed; the receiver's log says why"
            logger?.error("account API: the store failed", metadata: ["risc.error": "\(Storage.explain(error))"])
            return Responses.json(
                JSONValue.object(["error": "store_unavailable", "description": .string(description)]).serialized, status: .serviceUnavailable,
                extra: [.retryAfter: "\(retryAfter)"])
        }
    }

    struct BadRequest: Error, CustomStringConvertible { let description: String }

    /// A request's JSON object, read as strictly as linking reads one (`AccountLink(json:)`): a member
    /// it does not know, or one of the wrong type, is a 400, never passed over (a misspelt `tokens`
    /// would otherwise revoke all of an account's linked tokens, as a body naming neither list does).
    struct Body {
        let json: JSONObject

        init(_ request: Request, known: Set<String>, upTo limit: Int = 256 * 1024) async throws {
            let bytes = try await request.body.collect(upTo: limit)
            // Why and where (the parser's reason and byte offset), never the body's text.
            do { json = try JSONParser.parseObject(Array(buffer: bytes)) } catch { throw BadRequest(description: "body is not a JSON object: \(error)") }
            guard !JSONValue.object(json).containsNUL else { throw BadRequest(description: "the body must not hold a NUL character") }
            if let unknown = json.keys.filter({ !known.contains($0) }).sorted().first {
                throw BadRequest(description: "unknown member '\(Printable.safe(unknown, maxBytes: 64))' (known: \(known.sorted().joined(separator: ", ")))")
            }
        }

        /// A string member; nil when absent or null.
        func string(_ name: String) throws -> String? {
            guard let value = json[name], value != .null else { return nil }
            guard let text = value.stringValue else { throw BadRequest(description: "'\(name)' must be a string") }
            return text
        }

        /// A string member that must be there and not empty.
        func required(_ name: String) throws -> String {
            guard let text = try string(name), !text.isEmpty else { throw BadRequest(description: "'\(name)' is required") }
            return text
        }

        /// `issuer`, checked as linking checks it (not empty, no white space around it).
        func issuer() throws -> String? {
            try string("issuer").map(AdminAccountsController.checkedIssuer)
        }

        /// `created_at`: when a session began, in seconds since 1970, no later than `now` (a clock a
        /// few minutes ahead is taken as `now`; further ahead is milliseconds or a mistake).
        func sessionStart(now: Double) throws -> Double {
            do { return min(try AccountLink.sessionStart(json["created_at"], now: now) ?? now, now) } catch {
                throw BadRequest(description: error.description)
            }
        }

        func bool(_ name: String) throws -> Bool? {
            guard let value = json[name], value != .null else { return nil }
            guard let flag = value.boolValue else { throw BadRequest(description: "'\(name)' must be true or false") }
            return flag
        }

        /// An array of non-empty strings; nil when absent.
        func strings(_ name: String) throws -> [String]? {
            guard let value = json[name] else { return nil }
            let strings = value.arrayValue?.compactMap(\.stringValue)
            guard let strings, strings.count == value.arrayValue?.count, !strings.contains("") else {
                throw BadRequest(description: "'\(name)' must be an array of non-empty strings")
            }
            return strings
        }
    }

    /// The site revoked linked tokens of an account on its own side.
    private func revokeLinked(_ request: Request, _ context: RISCRequestContext) async throws -> Response {
        let body = try await Body(request, known: ["tokens", "token_hashes", "token_type", "issuer"])
        let subject = try Self.subject(context)
        var hashes: [String]?
        if let tokens = try body.strings("tokens") { hashes = tokens.map(SHA512.doubleHashBase64) }
        if let given = try body.strings("token_hashes") {
            let normalized = given.map(TokenFingerprint.normalizedHash)
            guard !normalized.contains(nil) else { throw BadRequest(description: "'token_hashes' must be base64 SHA-512 fingerprints") }
            hashes = (hashes ?? []) + normalized.compactMap { $0 }
        }
        let tokenType = try body.string("token_type")
        if let tokenType, !UnlinkNotices.tokenTypes.contains(tokenType) {
            throw BadRequest(description: "'token_type' is access_token or refresh_token")
        }
        let now = clock()
        guard
            let result = try await accounts.revokeLinkedTokens(
                subject: subject, issuer: try body.issuer(), hashes: hashes, tokenType: tokenType, reason: LinkedTokenRevocation.siteReason,
                notices: notices, now: now)
        else { return Responses.json(#"{"error":"not_found"}"#, status: .notFound) }
        record(.linkedTokensRevoked, subject: subject, now: now, result.json.objectValue ?? [:])
        return Responses.json(result.json.serialized, status: .ok)
    }

    /// The event-log line of a change the site made through the API.
    private func record(_ outcome: EventLogRecord.Outcome, subject: String, now: Double, _ fields: JSONObject) {
        log?.record(.site(outcome, source: "admin_api", subject: subject, notices: notices != nil, time: now, fields: fields))
    }

    private func link(_ request: Request) async throws -> Response {
        let link: AccountLink, now = clock()
        do { link = try AccountLink(json: try await Body(request, known: AccountLink.jsonMembers).json, now: now) } catch let error as AccountLinkError {
            throw BadRequest(description: error.description)
        }
        // The user the Google account was linked to, when it moves to another: the site learns it.
        let before = try await accounts.linkReportingMove(link, now: now)
        var answer: JSONObject = ["status": "linked"]
        if let before {
            answer["previous_user_id"] = .string(before)
            record(.relinked, subject: link.subject, now: now, ["user_id": .string(link.userID), "previous_user_id": .string(before)])
        }
        return Responses.json(JSONValue.object(answer).serialized, status: .created)
    }

    private func add(_ request: Request, _ context: RISCRequestContext, session: Bool) async throws -> Response {
        let body = try await Body(request, known: session ? ["session_id", "via_google", "issuer", "created_at"] : ["token", "kind", "issuer"])
        let subject = try Self.subject(context)
        let added: Bool
        if session {
            let id = try body.required("session_id")
            let issuer = try body.issuer(), viaGoogle = try body.bool("via_google") ?? true
            // The session's start: when the site says it began, else now (its record's created_at).
            added = try await accounts.add(
                to: subject, issuer: issuer, session: id, viaGoogle: viaGoogle, token: nil, tokenKind: .googleRefresh,
                now: try body.sessionStart(now: clock()))
        } else {
            let token = try body.required("token")
            guard let kind = TokenKind(rawValue: try body.string("kind") ?? TokenKind.googleRefresh.rawValue) else {
                throw BadRequest(description: "'kind' is google_refresh or linked")
            }
            let issuer = try body.issuer()
            added = try await accounts.add(
                to: subject, issuer: issuer, session: nil, viaGoogle: true, token: token, tokenKind: kind, now: clock())
        }
        return added ? Responses.json(#"{"status":"added"}"#, status: .created) : Responses.json(#"{"error":"not_found"}"#, status: .notFound)
    }
}
