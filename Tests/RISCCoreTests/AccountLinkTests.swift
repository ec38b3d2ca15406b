import RISCCore
import Testing

/// An account's JSON description (`risc accounts import`, `POST /admin/accounts`).
@Suite("Account links from JSON")
struct AccountLinkTests {
    static let now = 1_000_000.0

    static func link(_ json: String) throws -> AccountLink {
        try AccountLink(json: try JSONParser.parseObject(Array(json.utf8)), now: now)
    }

    @Test("a session is its id, or an object with its id and when it began (created_at, seconds since 1970)")
    func sessionStarts() throws {
        let link = try Self.link(#"{"subject":"s","user_id":"u","sessions":["a",{"id":"b","created_at":500},{"id":"c"},{"id":"d","created_at":1000200}]}"#)
        #expect(link.sessions == ["a", "b", "c", "d"])
        #expect(link.sessionStarts == ["b": 500, "d": 1_000_200])
        #expect(link.start(of: "a", now: Self.now) == Self.now && link.start(of: "b", now: Self.now) == 500)
        // A clock a few minutes ahead of risc's is taken as now.
        #expect(link.start(of: "d", now: Self.now) == Self.now)
    }

    @Test("a session object is read strictly: an id, a created_at that is seconds and not ahead, nothing else")
    func badSessions() {
        let cases: [(String, String)] = [
            (#"[{"created_at":5}]"#, "'sessions': an object needs 'id'"),
            (#"[{"id":""}]"#, "'sessions': an object needs 'id'"),
            (#"[{"id":"b","created_at":"yesterday"}]"#, "'created_at' must be a number"),
            (#"[{"id":"b","created_at":-1}]"#, "'created_at' must be seconds since 1970"),
            (#"[{"id":"b","created_at":1000000000}]"#, "milliseconds are not seconds"),
            (#"[{"id":"b","start":5}]"#, "unknown member 'start' in a session (known: created_at, id)"),
            (#"[5]"#, "'sessions' must be an array of non-empty strings or session objects"),
            (#"[""]"#, "'sessions' must be an array of non-empty strings or session objects"),
        ]
        for (sessions, why) in cases {
            do {
                _ = try Self.link(#"{"subject":"s","user_id":"u","sessions":\#(sessions)}"#)
                Issue.record("accepted \(sessions)")
            } catch let error as AccountLinkError {
                #expect(error.description.contains(why), "\(sessions): \(error.description)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
