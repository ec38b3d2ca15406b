import RISCCore
import Testing

/// The store-independent rules (issue 14): retry backoff and event ordering, without a database.
@Suite("Rules: retry policy and ordering")
struct RulesTests {
    @Test("the retry delays follow the documented table")
    func delays() {
        var policy = RetryPolicy()
        policy.jitter = 0
        #expect((1...13).map { policy.delay(afterFailures: $0, age: 60) } == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048, 3_600])
        #expect(policy.delay(afterFailures: 200, age: 86_400) == 3_600)  // a day into an outage: still hourly
        policy.maximumAttempts = 40
        #expect(policy.delay(afterFailures: 40, age: 60) == nil)
        let jittered = RetryPolicy().delay(afterFailures: 3, age: 0, random: 1)
        #expect(jittered == 4.8)
    }

    /// Issue 16: with the old count-based defaults a webhook outage of 7–8 minutes dead-lettered
    /// everything (ten attempts, 1 s doubling: 511 s).
    @Test("the give-up point is time: an outage of hours dead-letters nothing; the last attempt falls at the window's end")
    func window() {
        var policy = RetryPolicy()
        policy.jitter = 0
        #expect(policy.window == 5 * 86_400)
        // Walk the defaults through an outage: the attempts fall inside the window and keep coming.
        var age = 0.0, failures = 0, attempts: [Double] = []
        while let delay = policy.delay(afterFailures: failures + 1, age: age) {
            failures += 1
            age += delay
            attempts.append(age)
        }
        #expect(attempts.filter { $0 < 8 * 60 }.count < attempts.count)  // 8 minutes in, far from given up
        #expect(attempts.last == policy.window)  // the last attempt when the window closes
        #expect((120...140).contains(attempts.count), "\(attempts.count) attempts in 5 days")
        #expect(policy.delay(afterFailures: 1, age: policy.window) == nil)
        #expect(policy.delay(afterFailures: 5, age: policy.window - 3) == 3)  // never past the end
        policy.window = 0
        #expect(!policy.problems.isEmpty)
    }

    @Test("an older event never undoes a newer access change; equal times apply; the change time only moves forward")
    func accessChanges() {
        #expect(OrderingRule.accessChangeApplies(eventTime: 100, lastAccessChange: nil))
        #expect(OrderingRule.accessChangeApplies(eventTime: 100, lastAccessChange: 100))
        #expect(OrderingRule.accessChangeApplies(eventTime: 100, lastAccessChange: 99))
        #expect(!OrderingRule.accessChangeApplies(eventTime: 100, lastAccessChange: 101))
        #expect(OrderingRule.accessChangeTime(after: nil, eventTime: 50) == 50)
        #expect(OrderingRule.accessChangeTime(after: 70, eventTime: 50) == 70)
        // An event dated past the clock-skew allowance counts as dated at its end.
        #expect(OrderingRule.eventTime(sent: 1_000 + 365 * 86_400, now: 1_000) == 1_300)
        #expect(OrderingRule.eventTime(sent: 1_250, now: 1_000) == 1_250 && OrderingRule.eventTime(sent: 10, now: 1_000) == 10)
        // Any order of arrival ends in the state of the newest event.
        let events: [(time: Double, enabled: Bool)] = [(10, false), (20, true), (30, false), (25, true)]
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]] {
            var enabled = true
            var last: Double?
            for index in order where OrderingRule.accessChangeApplies(eventTime: events[index].time, lastAccessChange: last) {
                enabled = events[index].enabled
                last = OrderingRule.accessChangeTime(after: last, eventTime: events[index].time)
            }
            #expect(!enabled && last == 30, "order \(order)")
        }
    }

    @Test("ending sessions spares sessions opened after the event's second")
    func sessionCutoff() {
        #expect(OrderingRule.sessionCutoff(eventTime: 1_000) == 1_001)
        let sessions: [Double] = [999, 1_000, 1_000.5, 1_001, 1_002]
        #expect(sessions.filter { $0 <= OrderingRule.sessionCutoff(eventTime: 1_000) } == [999, 1_000, 1_000.5, 1_001])
    }
}

/// Issue 25: what each action does to an account is decided once, in Core, for every store.
@Suite("Account actions: one decision for every store")
struct AccountActionsTests {
    static func plan(_ events: String, iat: Double = 2_000) throws -> ActionPlan {
        let payload = #"{"iss":"https://accounts.google.com/","aud":"a","iat":"# + "\(iat)" + #","jti":"j","events":{"# + events + "}}"
        return ActionPlan.plan(for: try SecurityEventToken(payload: Array(payload.utf8)), table: .default, now: iat)
    }

    static let alice = #"{"subject":{"subject_type":"iss_sub","iss":"https://accounts.google.com/","sub":"alice"}"#
    static let risc = "https://schemas.openid.net/secevent/risc/event-type/"

    @Test("a hijacking is primitives on the account found; results come from the rows changed")
    func hijacking() throws {
        let plan = try Self.plan(#""\#(Self.risc)account-disabled":\#(Self.alice),"reason":"hijacking"}"#)
        let lookups = AccountActions.lookups(for: plan.steps[0], keyIssuer: "https://accounts.google.com", tokenKey: [])
        #expect(lookups == [.subject(issuer: "https://accounts.google.com", subject: "alice")])
        // Each of Google's three spellings of its issuer in a subject finds the account linked
        // under it (spec §1.4, §9 question 1); another issuer's bare name does not become its URL.
        for (spelling, scope) in [
            ("accounts.google.com", "https://accounts.google.com"), ("https://accounts.google.com", "https://accounts.google.com"),
            ("issuer.example", "issuer.example"),
        ] {
            let other = try Self.plan(
                #""\#(Self.risc)account-disabled":{"subject":{"subject_type":"iss_sub","iss":"\#(spelling)","sub":"alice"},"reason":"hijacking"}"#)
            #expect(
                AccountActions.lookups(for: other.steps[0], keyIssuer: "https://accounts.google.com", tokenKey: [])
                    == [.subject(issuer: scope, subject: "alice")])
        }
        let account = AccountActions.Account(id: 7, accessChangedAt: 1_000)
        let planned = AccountActions.plan(plan, accounts: [account]) { _, _ in false }
        let primitives = planned.compactMap { planned -> AccountActions.Primitive? in
            if case .primitive(let primitive) = planned.work { return primitive }
            return nil
        }
        #expect(primitives.contains(.endSessions(account: 7, createdBy: 2_001, googleOnly: false, reason: "account-disabled:hijacking")))
        #expect(primitives.contains(.setAccess(account: 7, flag: .googleSignIn, enabled: false, eventTime: 2_000)))
        #expect(primitives.contains(.revokeTokens(account: 7, kind: .linked, reason: "account-disabled:hijacking")))
        let results = planned.map { $0.result { primitive in if case .endSessions = primitive { 2 } else { 1 } } }
        #expect(results.contains("ended 2 sessions") && results.contains("google_signin_enabled = false") && results.contains("revoked 1 token"))
    }

    /// Found: with `issuer_aliases`, a SET whose subject named the issuer by an alias was
    /// accepted, its rows found by the alias, and its account looked up under the alias: none of
    /// the accounts linked under the issuer was found, and the SET was applied to nobody.
    @Test("a subject naming its issuer by a configured alias is looked up under the issuer")
    func aliasedSubjectIssuer() throws {
        var table = ActionTable.default
        table.alias(["https://old.example/", "old.example"], to: "https://new.example/")
        for spelling in ["https://old.example", "https://old.example/", "old.example", "https://new.example"] {
            let payload =
                #"{"iss":"https://old.example","aud":"a","iat":1,"jti":"j","events":{"\#(Self.risc)sessions-revoked":{"subject":{"subject_type":"iss_sub","iss":"\#(spelling)","sub":"alice"}}}}"#
            let plan = ActionPlan.plan(for: try SecurityEventToken(payload: Array(payload.utf8)), table: table, now: 2_000)
            #expect(
                AccountActions.lookups(for: plan.steps[0], keyIssuer: "https://new.example", tokenKey: [])
                    == [.subject(issuer: "https://new.example", subject: "alice")], "\(spelling)")
        }
        // Without the alias, the subject's own issuer, as before.
        let payload =
            #"{"iss":"https://new.example","aud":"a","iat":1,"jti":"j","events":{"\#(Self.risc)sessions-revoked":{"subject":{"subject_type":"iss_sub","iss":"https://idp.example","sub":"alice"}}}}"#
        let plan = ActionPlan.plan(for: try SecurityEventToken(payload: Array(payload.utf8)), table: table, now: 2_000)
        #expect(
            AccountActions.lookups(for: plan.steps[0], keyIssuer: "https://new.example", tokenKey: []) == [.subject(issuer: "https://idp.example", subject: "alice")])
    }

    @Test("an older access change is superseded before any statement; applied actions are not redone; nobody known is a no-op")
    func decisions() throws {
        let plan = try Self.plan(#""\#(Self.risc)account-enabled":\#(Self.alice)}"#)
        let newer = AccountActions.Account(id: 7, accessChangedAt: 3_000)
        #expect(AccountActions.plan(plan, accounts: [newer]) { _, _ in false }.map { $0.result { _ in 1 } } == [OrderingRule.superseded, OrderingRule.superseded])
        let planned = AccountActions.plan(plan, accounts: [AccountActions.Account(id: 7, accessChangedAt: nil)]) { _, _ in true }
        #expect(planned.allSatisfy { !$0.isNew } && planned.map { $0.result { _ in 1 } }.allSatisfy { $0 == "already applied" })
        #expect(AccountActions.plan(plan, accounts: [nil]) { _, _ in false }.map { $0.result { _ in 1 } }.allSatisfy { $0 == ActionOutcome.unknownSubject })
        // The primitive answered "nothing changed": the ordering rule held in the statement.
        let restore = AccountActions.plan(plan, accounts: [AccountActions.Account(id: 7, accessChangedAt: nil)]) { _, _ in false }
        #expect(restore.map { $0.result { _ in 0 } }.allSatisfy { $0 == OrderingRule.superseded })
    }
}
