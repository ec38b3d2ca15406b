import Foundation
import RISCCore
import Testing

/// `Timestamp.parse`, risc's own RFC 3339 reader (`risc replay --since/--until`, a checkpoint's
/// `risc-time`): Foundation's formatter, which both used, killed risc with SIGFPE (ICU divided by
/// zero) on a fraction of 33 digits, found by `scripts/fuzz` in a checkpoint read back.
@Suite("Timestamp.parse: RFC 3339 date-times read without Foundation's formatter")
struct TimestampParseTests {
    @Test("reads what Timestamp.iso8601 writes, to the microsecond, from year 1 to 9999")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let seconds = (Double.random(in: -62_135_596_800...253_402_300_799, using: &generator) * 1e6).rounded() / 1e6
            let text = Timestamp.iso8601(seconds)
            guard let parsed = Timestamp.parse(text) else {
                Issue.record("\(text) not read")
                return
            }
            #expect(abs(parsed - seconds) < 2e-6, "\(text): \(parsed) for \(seconds)")
        }
    }

    /// From 1583 on: before the Gregorian reform Foundation's calendar is Julian (0001-01-01 falls
    /// two days later there), where RFC 3339 and `iso8601` (gmtime) are proleptic Gregorian.
    @Test("agrees with Foundation's formatter on ordinary times, offsets and leap days")
    func agreesWithFoundation() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for text in [
            "1970-01-01T00:00:00.0Z", "2026-11-23T01:00:00.5Z", "2000-02-29T23:59:59.999+01:00", "1900-03-01T00:00:00.25-05:30",
            "2026-12-06T05:28:05.503222Z", "1583-01-01T00:00:00.000Z", "9999-12-31T23:59:59.5Z", "2024-02-29T12:00:00.125+14:00",
        ] {
            let expected = try #require(formatter.date(from: text)?.timeIntervalSince1970, "\(text)")
            #expect(Timestamp.parse(text).map { abs($0 - expected) < 1e-3 } == true, "\(text): \(String(describing: Timestamp.parse(text))) for \(expected)")
        }
    }

    @Test("a long fraction, lowercase t and z, no fraction, and a leap second are read")
    func forms() {
        #expect(Timestamp.parse("2026-12-06T05:28:05.503222222222222222222222222222222938Z").map { abs($0 - 1_796_534_885.503_222) < 1e-5 } == true)
        #expect(Timestamp.parse("1970-01-01t00:00:01z") == 1)
        #expect(Timestamp.parse("1970-01-01T00:00:00+01:00") == -3_600)
        #expect(Timestamp.parse("1998-12-31T23:59:60Z") == Timestamp.parse("1999-01-01T00:00:00Z"))
    }

    @Test("refuses what is not an RFC 3339 date-time, and days the calendar does not have")
    func refusals() {
        for text in [
            "", "2026-11-23", "2026-11-23T01:00Z", "2026-11-23T01:00:00", "2026-11-23 01:00:00Z", "2026-11-23T01:00:00.Z",
            "2026-11-23T01:00:00+0100", "2026-11-23T01:00:00+24:00", "2026-11-23T01:00:00Zjunk", "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z", "2026-04-31T00:00:00Z",
            "2026-11-23T24:00:00Z", "2026-11-23T23:60:00Z", "2026-11-23T23:59:61Z", "+2026-11-23T01:00:00Z", "２０２６-11-23T01:00:00Z",
        ] {
            #expect(Timestamp.parse(text) == nil, "\(text) read as \(String(describing: Timestamp.parse(text)))")
        }
    }
}
