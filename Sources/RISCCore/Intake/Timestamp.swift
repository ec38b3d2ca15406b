#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 timestamps in UTC with microseconds, without Foundation's formatter on the hot path.
public enum Timestamp {
    public static func iso8601(_ seconds: Double) -> String {
        var whole = time_t(seconds.rounded(.down))
        var micros = Int((seconds - Double(whole)) * 1_000_000)
        if micros >= 1_000_000 { whole += 1; micros -= 1_000_000 }
        var parts = tm()
        gmtime_r(&whole, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let fraction = String(micros)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
            + String(repeating: "0", count: 6 - fraction.count) + fraction + "Z"
    }
}
