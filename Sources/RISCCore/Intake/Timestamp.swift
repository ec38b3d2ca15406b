#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 timestamps in UTC with microseconds, without Foundation's formatter on the hot path.
public enum Timestamp {
    public static func iso8601(_ seconds: Double) -> String {
        // Total over every Double: a time outside 0001–9999 (or NaN) is clamped to the nearest end,
        // rather than trapping in the integer conversion below.
        let seconds = seconds.isNaN ? 0 : min(max(seconds, -62_135_596_800), 253_402_300_799)
        var whole = time_t(seconds.rounded(.down))
        var micros = Int((seconds - Double(whole)) * 1_000_000)
        if micros >= 1_000_000 { whole += 1; micros -= 1_000_000 }
        var parts = tm()
        gmtime_r(&whole, &parts)
        // "YYYY-MM-DDTHH:MM:SS.uuuuuuZ", written digit by digit into one buffer.
        return String(unsafeUninitializedCapacity: 27) { buffer in
            var index = 0
            func put(_ value: Int, digits: Int) {
                var value = value
                for offset in stride(from: digits - 1, through: 0, by: -1) {
                    buffer[index + offset] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += digits
            }
            func put(_ character: Unicode.Scalar) {
                buffer[index] = UInt8(ascii: character)
                index += 1
            }
            put(Int(parts.tm_year) + 1900, digits: 4); put("-"); put(Int(parts.tm_mon) + 1, digits: 2); put("-")
            put(Int(parts.tm_mday), digits: 2); put("T"); put(Int(parts.tm_hour), digits: 2); put(":")
            put(Int(parts.tm_min), digits: 2); put(":"); put(Int(parts.tm_sec), digits: 2); put(".")
            put(micros, digits: 6); put("Z")
            return index
        }
    }

    /// Seconds since the epoch of an RFC 3339 date-time (§5.6: `2026-11-23T01:00:00Z`,
    /// `2026-11-23t01:00:00.25+01:00`), nil for anything else: a day the calendar does not have, an
    /// hour past 23, a minute past 59, a second past 60 (a leap second counts as the next minute's
    /// first). A fraction may have any number of digits; those past the nanosecond are read as
    /// digits and dropped. Not Foundation's formatter: ICU's divided by zero on a fraction of 30-odd
    /// digits (SIGFPE: `risc replay --since`, a checkpoint read back).
    public static func parse(_ text: some StringProtocol) -> Double? {
        let bytes = Array(text.utf8)
        var index = 0
        func digit(at position: Int) -> Int? {
            position < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) ? Int(bytes[position] - UInt8(ascii: "0")) : nil
        }
        func number(_ digits: Int) -> Int? {
            var value = 0
            for position in index..<index + digits {
                guard let digit = digit(at: position) else { return nil }
                value = value * 10 + digit
            }
            index += digits
            return value
        }
        func expect(_ characters: Unicode.Scalar...) -> Bool {
            guard index < bytes.count, characters.contains(where: { UInt8(ascii: $0) == bytes[index] }) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("T", "t"),
            let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2)
        else { return nil }
        var fraction = 0.0
        if expect(".") {
            var scale = 0.1, digits = 0
            while let digit = digit(at: index) {
                if digits < 9 { fraction += Double(digit) * scale }
                scale /= 10
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
        }
        var offset = 0
        if !expect("Z", "z") {
            guard index < bytes.count else { return nil }
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            guard expect("+", "-"), let offsetHours = number(2), expect(":"), let offsetMinutes = number(2), offsetHours < 24, offsetMinutes < 60
            else { return nil }
            offset = sign * (offsetHours * 3_600 + offsetMinutes * 60)
        }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        guard index == bytes.count, (1...12).contains(month), hour < 24, minute < 60, second <= 60,
            (1...[31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]).contains(day)
        else { return nil }
        // Days since 1970-01-01 of the proleptic Gregorian date (a year counted from March).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400, yearOfEra = y % 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let days = era * 146_097 + yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear - 719_468
        return Double(days * 86_400 + hour * 3_600 + minute * 60 + second - offset) + fraction
    }

    /// An HTTP `Date` value, IMF-fixdate (RFC 9110 §5.6.7): `Fri, 15 Jan 2027 08:00:00 GMT`, the
    /// second `seconds` falls in (clamped like `iso8601`).
    public static func httpDate(_ seconds: Double) -> String {
        let seconds = seconds.isNaN ? 0 : min(max(seconds, -62_135_596_800), 253_402_300_799)
        var whole = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&whole, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = String(Int(parts.tm_year) + 1900)
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) "
            + String(repeating: "0", count: max(0, 4 - year.count)) + year + " \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
