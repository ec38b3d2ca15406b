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
