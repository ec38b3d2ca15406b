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
