import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

@testable import RISCSQLite

@Suite("Admin account API", .serialized)
struct AdminAccountAPITests {
    static let token = "admin-token-0123456789abcdef"
    static let auth = ("Authorization", "Bearer " + token)

    /// A file holding `contents` (the suite's admin token and a newline by default), for
    /// `admin.token_file`; the caller removes it.
    static func tokenFile(_ contents: [UInt8] = Array((token + "\n").utf8)) throws -> String {
        let path = Scratch.root.appendingPathComponent("risc-admin-\(UUID().uuidString)").path
        try Data(contents).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A started harness with the account API on (the suite's token), and that token's file,
    /// which the caller removes.
    static func startedWithAccountAPI() async throws -> (harness: ServerHarness, tokenFile: String) {
        let tokenFile = try tokenFile()
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        return (harness, tokenFile)
    }

    /// POSTs `body` to the account API's `path` with the suite's token: the status and the answer's text.
    static func post(_ body: String, to path: String, on harness: ServerHarness) async throws -> (status: Int, text: String) {
        let response = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: [auth], body: Array(body.utf8)))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test("register accounts, sessions and tokens over the authenticated API; an event then acts on them")
    func api() async throws {
        let tokenFile = try Self.tokenFile()
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        let auth = Self.auth
        func post(_ path: String, _ body: String, headers: [(name: String, value: String)]) async throws -> HTTPResponse {
            try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: headers, body: Array(body.utf8)))
        }
        #expect(try await post("/admin/accounts", #"{"subject":"110169484474386276334","user_id":"u-9"}"#, headers: []).status == 401)
        #expect(try await post("/admin/accounts", #"{"subject":"x","user_id":"u"}"#, headers: [("Authorization", "Bearer wrong")]).status == 401)
        #expect(try await post("/admin/accounts", #"{"subject":"x","user_id":"u"}"#, headers: [("Authorization", "Bearer " + Self.token.uppercased())]).status == 401)
        let put = try await harness.client.perform(HTTPRequest(method: "PUT", url: harness.adminURL + "/admin/accounts/someone", headers: [auth], body: []))
        #expect(put.status == 405 && put.header("allow") == "DELETE, GET, HEAD", "\(put.status) \(put.header("allow") ?? "-")")
        // Found: "bearer TOKEN" (curl users type it) was 401; the scheme is case-insensitive (RFC 9110 §11.1).
        for (index, scheme) in ["bearer ", "BEARER  "].enumerated() {
            let body = #"{"subject":"scheme-\#(index)","user_id":"u"}"#
            #expect(try await post("/admin/accounts", body, headers: [("Authorization", scheme + Self.token)]).status == 201, "\(scheme)")
        }
        let link = #"{"subject":"110169484474386276334","user_id":"u-9","issuer":""# + harness.issuer.baseURL + #""}"#
        #expect(try await post("/admin/accounts", link, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts", #"{"subject":1}"#, headers: [auth]).status == 400)
        #expect(try await post("/admin/accounts/110169484474386276334/sessions", #"{"session_id":"web-1"}"#, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/110169484474386276334/tokens", #"{"token":"1//0gadmin-token","kind":"google_refresh"}"#, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/nobody/sessions", #"{"session_id":"s"}"#, headers: [auth]).status == 404)
        let shown = try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/110169484474386276334", headers: [auth]))
        let account = try JSONParser.parseObject(shown.body)
        #expect(account["user_id"] == "u-9")
        #expect(account["sessions"]?.objectValue?["open"] == 1)
        #expect(account["tokens"]?.objectValue?["google_refresh"]?.objectValue?["active"] == 1)

        // An event about the account (issued now, after the session opened) ends the session.
        #expect(try await harness.post(try harness.token(jti: "act-1", type: .tokensRevoked)).status == 202)
        var ended = false
        for _ in 0..<1_500 where !ended {
            let now = try JSONParser.parseObject(
                try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/110169484474386276334", headers: [auth])).body)
            ended = now["sessions"]?.objectValue?["open"] == 0 && now["tokens"]?.objectValue?["google_refresh"]?.objectValue?["revoked"] == 1
            if !ended { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(ended)
        // Unlinking (issue 15): the account goes with its sessions and tokens; a second time, 404.
        let unlinkURL = harness.adminURL + "/admin/accounts/110169484474386276334"
        #expect(try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL)).status == 401)
        let unlinked = try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL, headers: [auth]))
        #expect(unlinked.status == 200 && String(decoding: unlinked.body, as: UTF8.self) == #"{"unlinked":1}"#)
        #expect(try await harness.client.perform(HTTPRequest(url: unlinkURL, headers: [auth])).status == 404)
        #expect(try await harness.client.perform(HTTPRequest(method: "DELETE", url: unlinkURL, headers: [auth])).status == 404)
        // Found: the lines the API writes had outcomes (`unlinked`, `linked_tokens_revoked`) that
        // `risc tail --outcome` refused as unknown. Every line written has an outcome it knows.
        #expect(try await post("/admin/accounts", link, headers: [auth]).status == 201)
        #expect(try await post("/admin/accounts/110169484474386276334/linked-tokens/revoke", "{}", headers: [auth]).status == 200)
        let outcomes = Set(harness.eventLogLines.compactMap { $0["outcome"]?.stringValue })
        #expect(outcomes.isSuperset(of: ["unlinked", "linked_tokens_revoked"]), "\(outcomes)")
        let unknown = outcomes.filter { !EventLogRecord.Outcome.all.contains(.init(rawValue: $0)) }
        #expect(unknown.isEmpty, "outcomes risc tail --outcome refuses: \(unknown)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: a session's start was the time the site registered it with risc. A login server that
    /// registers sessions from a queue, seconds or minutes late, registered a session opened before
    /// a hijacking after the event's time: "end sessions" then spared it (only sessions opened at or
    /// before the event end). The site may now say when the session began (`created_at`).
    @Test("a session registered late with the time it began is ended by an event after that time; a bad created_at is a 400")
    func sessionCreatedAt() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let auth = Self.auth
        func call(_ path: String, _ body: String) async throws -> (status: Int, text: String) { try await Self.post(body, to: path, on: harness) }
        let base = "/admin/accounts/110169484474386276334", now = Date().timeIntervalSince1970
        let link = #"{"subject":"110169484474386276334","user_id":"u-1","issuer":""# + harness.issuer.baseURL + #""}"#
        #expect(try await call("/admin/accounts", link).status == 201)
        for (body, expected) in [
            (#"{"session_id":"s","created_at":"yesterday"}"#, "'created_at' must be a number"),
            (#"{"session_id":"s","created_at":-1}"#, "'created_at'"),
            (#"{"session_id":"s","created_at":\#(Int(now * 1_000))}"#, "'created_at'"),
        ] {
            let answer = try await call(base + "/sessions", body)
            #expect(answer.status == 400 && answer.text.contains(expected), "\(body): \(answer.status) \(answer.text)")
        }
        #expect(try await call(base + "/sessions", #"{"session_id":"opened-an-hour-ago","created_at":\#(Int(now) - 3_600)}"#).status == 201)
        #expect(try await call(base + "/sessions", #"{"session_id":"opened-now"}"#).status == 201)
        // A hijacking ten minutes ago: the session opened an hour ago ends; the one opened now stays.
        #expect(try await harness.post(try harness.token(jti: "late-1") { $0["iat"] = .number(now - 600) }).status == 202)
        var sessions: JSONObject?
        for _ in 0..<1_500 where sessions?["ended"] != 1 {
            let account = try JSONParser.parseObject(try await harness.client.perform(HTTPRequest(url: harness.adminURL + base, headers: [auth])).body)
            sessions = account["sessions"]?.objectValue
            if sessions?["ended"] != 1 { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(sessions?["ended"] == 1 && sessions?["open"] == 1, "\(String(describing: sessions))")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: `DELETE /admin/accounts/{subject}` read `?issuer=` and ignored every other query
    /// parameter, so a misspelt `?isuer=https://other.example` (meant to remove one issuer's
    /// account) removed the subject's accounts under every issuer; `?issuer=` (empty) was taken as
    /// an issuer; and `GET` ignored `?issuer=` altogether, showing another issuer's account. The
    /// query is read as strictly as the bodies are: `issuer` only, checked as linking checks it.
    @Test("the account API's query is strict: an unknown parameter or an empty issuer is a 400 and removes nothing; GET and DELETE both honour issuer")
    func strictQuery() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        for issuer in ["https://accounts.google.com", "https://other.example"] {
            #expect(try await Self.post(#"{"subject":"shared-sub","user_id":"u-\#(issuer.count)","issuer":"\#(issuer)"}"#, to: "/admin/accounts", on: harness).status == 201)
        }
        func call(_ method: String, _ query: String) async throws -> (status: Int, text: String) {
            let response = try await harness.client.perform(HTTPRequest(method: method, url: harness.adminURL + "/admin/accounts/shared-sub" + query, headers: [Self.auth]))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }
        for (query, says) in [
            ("?isuer=https://other.example", "unknown query parameter 'isuer' (known: issuer)"), ("?issuer=", "'issuer' must not be empty"),
            ("?issuer=a&issuer=b", "'issuer' given twice"),
        ] {
            for method in ["DELETE", "GET"] {
                let answer = try await call(method, query)
                #expect(answer.status == 400 && answer.text.contains(says), "\(method) \(query): \(answer.status) \(answer.text)")
            }
        }
        #expect(try await call("GET", "?issuer=https://other.example").text.contains(#""issuer":"https://other.example""#))
        let removed = try await call("DELETE", "?issuer=https://other.example")
        #expect(removed.status == 200 && removed.text == #"{"unlinked":1}"#, "\(removed.text)")
        #expect(try await call("GET", "").text.contains(#""issuer":"https://accounts.google.com""#))
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: `POST /admin/accounts` linking a Google account that was linked to another of the
    /// site's users answered `{"status":"linked"}` as for a new link: the site's login server never
    /// learnt that a Google account moved between its users (a mistyped user id, or a sign-in that
    /// should be looked at). `risc accounts link` says "was …"; the API now names the previous user.
    @Test("linking a Google account linked to another user names that user in the answer; a new link or the same user names none")
    func linkNamesThePreviousUser() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        func link(_ user: String) async throws -> JSONObject {
            let answer = try await Self.post(#"{"subject":"110169484474386276334","user_id":"\#(user)"}"#, to: "/admin/accounts", on: harness)
            #expect(answer.status == 201, "\(answer.text)")
            return try JSONParser.parseObject(Array(answer.text.utf8))
        }
        #expect(try await link("u-1") == ["status": "linked"])
        #expect(try await link("u-1") == ["status": "linked"])
        #expect(try await link("u-2") == ["status": "linked", "previous_user_id": "u-1"])
        // One audit line, for the move only.
        let moves = harness.eventLogLines.filter { $0["step"] == "site" }
        #expect(
            moves.count == 1 && moves.first?["outcome"] == "relinked" && moves.first?["source"] == "admin_api"
                && moves.first?["user_id"] == "u-2" && moves.first?["previous_user_id"] == "u-1", "\(moves)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: only `POST /admin/accounts` checked its body. The other three took what they knew and
    /// dropped the rest: `{"tokenz": [...]}` (a typo of `tokens`) revoked **every** linked token of
    /// the account and queued an unlink notice to Google for each, as a body naming neither list
    /// does; `"kind": 5` stored a linked token as a Google refresh token; `"via_google": "false"` and
    /// a misspelt `via_gogle` left a session one a `tokens-revoked` event ends; `"issuer": 5` went to
    /// the Google account of that subject.
    @Test("the sessions, tokens and linked-token endpoints refuse unknown members and wrong types, as linking does; nothing is changed")
    func strictBodies() async throws {
        let (harness, tokenFile) = try await Self.startedWithAccountAPI()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let auth = Self.auth
        func call(_ path: String, _ body: String) async throws -> (status: Int, text: String) { try await Self.post(body, to: path, on: harness) }
        let subject = "110169484474386276334", base = "/admin/accounts/110169484474386276334"
        let link = #"{"subject":"\#(subject)","user_id":"u-1","linked_tokens":["lt-1","lt-2"]}"#
        #expect(try await call("/admin/accounts", link).status == 201)
        for (path, body, expected) in [
            // Found: each of these was "body is not a JSON object", for bodies that hold one: why, and where.
            ("/sessions", #"{"session_id":"web-1"}{}"#, "trailing characters after JSON value at byte 22"),
            ("/sessions", #"{"session_id":"web-1","session_id":"web-2"}"#, "duplicate member name at byte"),
            ("/sessions", #"["web-1"]"#, "body is not a JSON object: expected a JSON object"),
            ("/linked-tokens/revoke", #"{"tokenz":["lt-1"]}"#, "unknown member 'tokenz' (known: issuer, token_hashes, token_type, tokens)"),
            ("/linked-tokens/revoke", #"{"tokens":["lt-1"],"issuer":5}"#, "'issuer' must be a string"),
            ("/linked-tokens/revoke", #"{"tokens":["lt-1"],"token_type":1}"#, "'token_type' must be a string"),
            ("/tokens", #"{"token":"rt-1","kind":5}"#, "'kind' must be a string"),
            ("/tokens", #"{"token":"rt-1","kind":"linked","via_google":true}"#, "unknown member 'via_google' (known: issuer, kind, token)"),
            ("/tokens", #"{"token":7}"#, "'token' must be a string"),
            ("/sessions", #"{"session_id":"web-1","via_google":"false"}"#, "'via_google' must be true or false"),
            ("/sessions", #"{"session_id":"web-1","via_gogle":false}"#, "unknown member 'via_gogle' (known: created_at, issuer, session_id, via_google)"),
            ("/sessions", #"{"session_id":"web-1","issuer":5}"#, "'issuer' must be a string"),
            ("/sessions", #"{"session_id":"web-1","issuer":" https://accounts.google.com"}"#, "'issuer' must not begin or end with white space"),
            ("/sessions", #"{"session_id":3}"#, "'session_id' must be a string"),
        ] {
            let answer = try await call(base + path, body)
            #expect(answer.status == 400 && answer.text.contains(expected), "\(path) \(body): \(answer.status) \(answer.text)")
        }
        // Nothing was changed by any of them.
        let shown = try JSONParser.parseObject(
            try await harness.client.perform(HTTPRequest(url: harness.adminURL + base, headers: [auth])).body)
        #expect(shown["sessions"]?.objectValue?["open"] == 0, "\(shown)")
        #expect(shown["tokens"]?.objectValue?["linked"]?.objectValue?["active"] == 2, "\(shown)")
        #expect(shown["tokens"]?.objectValue?["google_refresh"]?.objectValue?["active"] == 0, "\(shown)")
        // What is right still works.
        #expect(try await call(base + "/sessions", #"{"session_id":"web-1","via_google":false}"#).status == 201)
        #expect(try await call(base + "/tokens", #"{"token":"rt-1","kind":"google_refresh"}"#).status == 201)
        let revoked = try await call(base + "/linked-tokens/revoke", #"{"tokens":["lt-1"]}"#)
        #expect(revoked.status == 200 && revoked.text.contains(#""revoked":1"#), "\(revoked)")
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: a secret file saved with a UTF-8 byte-order mark (Windows' Notepad) kept the mark in
    /// the secret: the admin token never matched what the site sent (401 for every call), and a
    /// webhook secret or a client secret would have been as wrong.
    @Test("a secret file starting with a byte-order mark is read without it: the admin token matches")
    func secretWithByteOrderMark() async throws {
        let tokenFile = try Self.tokenFile([0xEF, 0xBB, 0xBF] + Array((Self.token + "\r\n").utf8))
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        try await harness.start()
        let response = try await harness.client.perform(
            HTTPRequest(url: harness.adminURL + "/admin/accounts/nobody", headers: [Self.auth]))
        #expect(response.status == 404, "\(response.status): the token did not match")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("the API records its times by the receiver's clock: a session it opens is ended by a SET issued at that moment by that clock")
    func apiTimesFromTheClock() async throws {
        let tokenFile = try Self.tokenFile()
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        // The receiver's clock an hour behind the system's: what the API records must follow it,
        // or a session opened "now" would look an hour newer than a SET issued at the same moment.
        let clock = TestClock(systemNow() - 3_600)
        let harness = try ServerHarness { $0.adminTokenFile = tokenFile }
        harness.clock = clock
        try await harness.start()
        let auth = Self.auth
        let subject = "110169484474386276334"
        func post(_ path: String, _ body: String) async throws -> HTTPResponse {
            try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + path, headers: [auth], body: Array(body.utf8)))
        }
        #expect(try await post("/admin/accounts", #"{"subject":"\#(subject)","user_id":"u-7","issuer":"\#(harness.issuer.baseURL)"}"#).status == 201)
        #expect(try await post("/admin/accounts/\(subject)/sessions", #"{"session_id":"web-7"}"#).status == 201)
        let jti = "admin-clock-1"
        let token = try harness.token(jti: jti, type: .sessionsRevoked) { $0["iat"] = .number(clock.now.rounded(.down)) }
        #expect(try await harness.post(token).status == 202)
        #expect(await waitWhile { !harness.eventLogLines.contains { $0["jti"]?.stringValue == jti && $0["step"] == "applied" } })
        let shown = try JSONParser.parseObject(
            try await harness.client.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/\(subject)", headers: [auth])).body)
        #expect(shown["sessions"]?.objectValue?["open"] == 0, "the session the API opened at the clock's now outlived a SET issued then: \(shown)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("a journaled SET's commit time and its received line's latency end when it was durable, not when the index took it (the writer's linger)")
    func commitTimedToDurability() async throws {
        let clock = TestClock(systemNow().rounded(.down))
        let harness = try ServerHarness()
        harness.clock = clock
        try await harness.start()
        let jti = "durable-time-1"
        // The writer is held (its database's write lock, by a thread of the test's) while the SET is
        // made durable and answered; the receiver's clock moves on before the index takes it.
        let events = try #require(try harness.receiver.storage.store.embedded?.events())
        let lock = events.writer.writeLock
        let writer = await HeldOnThread(lock: { lock.lock() }, unlock: { lock.unlock() })
        // Not `harness.post`: it waits for the index after a 202, which the held writer holds back.
        let answer = try await harness.client.perform(
            HTTPRequest(
                method: "POST", url: harness.publicURL + harness.configuration.eventsPath, headers: [("Content-Type", "application/secevent+jwt")],
                body: Array(try harness.token(jti: jti).utf8)))
        #expect(answer.status == 202)
        clock.advance(1)
        writer.release()
        await harness.indexed()
        let metrics = String(decoding: try await harness.get(harness.adminURL + "/metrics").body, as: UTF8.self)
        #expect(ServerHarness.value(metrics, "risc_commit_duration_seconds_count") == 1)
        #expect(ServerHarness.value(metrics, "risc_commit_duration_seconds_sum") == 0, "the commit time ran on to the index")
        let received = try #require(harness.eventLogLines.first { $0["jti"]?.stringValue == jti && $0["step"] == "received" })
        #expect(received["latency_us"] == 0, "\(received)")
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("issue 15 §4: POST /admin/linking/app-flip checks a link, builds the redirect, and refuses a user whose Google sign-in risc suspended")
    func appFlip() async throws {
        let tokenFile = try Self.tokenFile()
        let harness = try ServerHarness {
            $0.adminTokenFile = tokenFile
            $0.linkingGoogleClientID = "google-client"
        }
        try await harness.start()
        let auth = Self.auth
        func check(_ body: JSONObject) async throws -> JSONObject {
            let response = try await harness.client.perform(
                HTTPRequest(
                    method: "POST", url: harness.adminURL + "/admin/linking/app-flip", headers: [auth], body: Array(JSONValue.object(body).serialized.utf8)))
            #expect(response.status == 200)
            return try JSONParser.parseObject(response.body)
        }
        let redirect = "https://oauth-redirect.googleusercontent.com/a/com.google.OPA"
        let link = AppFlipLink.make(redirect: redirect, state: "s1")
        var verdict = try await check(["url": .string(link), "code": "abc"])
        #expect(verdict["acceptable"] == true && verdict["redirect"]?.stringValue == redirect + "?code=abc&state=s1")
        verdict = try await check(["url": .string(link), "outcome": "cancel"])
        #expect(verdict["error"] == "cancelled")
        // A user whose Google account was disabled: risc suspended its sign-in; relinking is refused.
        _ = try await harness.receiver.storage.accounts.link(
            AccountLink(issuer: harness.issuer.baseURL, subject: "110169484474386276334", userID: "u-1"), now: 1_000)
        #expect(try await harness.post(try harness.token(jti: "disabled", type: .accountDisabled)).status == 202)
        _ = try await waitWhile { try await harness.receiver.storage.accounts.googleSignInSuspended(userID: "u-1") == false }
        verdict = try await check(["url": .string(link), "code": "abc", "user_id": "u-1"])
        #expect(verdict["acceptable"] == false && verdict["error"] == "unrecoverable")
        // Found: a user ID that was not a string (or a misspelt member) was passed over, and the
        // suspended user's link came back acceptable. Refused now, as every admin body is read.
        for (body, expected) in [
            (#"{"url":"\#(link)","code":"abc","user_id":1}"#, "'user_id' must be a string"),
            (#"{"url":"\#(link)","code":"abc","userid":"u-1"}"#, "unknown member 'userid' (known: code, outcome, url, user_id)"),
        ] {
            let refused = try await harness.client.perform(
                HTTPRequest(method: "POST", url: harness.adminURL + "/admin/linking/app-flip", headers: [auth], body: Array(body.utf8)))
            #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains(expected), "\(body)")
        }
        let evil = AppFlipLink.make(redirect: redirect + ".evil.example", state: "s1")
        verdict = try await check(["url": .string(evil), "code": "abc"])
        #expect(verdict["error"] == "invalid_request" && verdict["redirect"] == .null)
        let unauthenticated = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + "/admin/linking/app-flip", body: Array("{}".utf8)))
        #expect(unauthenticated.status == 401)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("without a token file the API is not there")
    func off() async throws {
        let harness = try ServerHarness()
        try await harness.start()
        let response = try await harness.client.perform(HTTPRequest(method: "POST", url: harness.adminURL + "/admin/accounts", body: Array("{}".utf8)))
        #expect(response.status == 404)
        try await harness.stop()
        harness.issuer.stop()
    }
}
