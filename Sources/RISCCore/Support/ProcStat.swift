import Foundation

/// A process's or a thread's `stat` file in /proc (`/proc/PID/stat`, `/proc/PID/task/TID/stat`),
/// its fields numbered as in proc(5): 1 the pid, 2 the command's name, 3 the state, 4 the parent,
/// 5 the process group, 14 and 15 the user and system CPU time in clock ticks, 22 the start time,
/// 23 the virtual memory size, 24 the resident pages. The name may hold spaces and parentheses,
/// so the fields after it are split from its last closing parenthesis.
public struct ProcStat: Sendable {
    /// The command's name (field 2), without its parentheses.
    public let name: String
    private let rest: [Substring]

    /// Nil when the file cannot be read (the process has gone) or is not a `stat` line.
    public init?(path: String) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let open = text.firstIndex(of: "("),
            let close = text.lastIndex(of: ")"), open < close
        else { return nil }
        name = String(text[text.index(after: open)..<close])
        rest = text[text.index(after: close)...].split { $0 == " " || $0 == "\n" }
    }

    /// Field `number` (3 and up), as text.
    public func field(_ number: Int) -> Substring? {
        number >= 3 && number - 3 < rest.count ? rest[number - 3] : nil
    }

    /// Field `number` (3 and up), as a number.
    public func number(_ number: Int) -> Double? { field(number).flatMap { Double($0) } }

    /// Field 3: "R", "S", "Z" (a zombie: ended, not yet reaped), ….
    public var state: Substring? { field(3) }
    /// Field 5.
    public var processGroup: Int32? { field(5).flatMap { Int32($0) } }

    /// When the machine booted, seconds since the epoch: the wall clock less the time since boot
    /// (`CLOCK_BOOTTIME`, the clock of field 22, the start time). Not /proc/stat's `btime`: under
    /// `ProcSubset=pid` (the shipped unit) /proc holds only processes' directories.
    public static func bootTime() -> Double? {
        var now = timespec(), sinceBoot = timespec()
        guard clock_gettime(CLOCK_REALTIME, &now) == 0, clock_gettime(CLOCK_BOOTTIME, &sinceBoot) == 0 else { return nil }
        return Double(now.tv_sec - sinceBoot.tv_sec) + Double(now.tv_nsec - sinceBoot.tv_nsec) / 1e9
    }

    /// Clock ticks a second, the unit of fields 14, 15 and 22.
    public static let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// User and system CPU time (fields 14 and 15), in seconds.
    public var cpuSeconds: Double? {
        guard let user = number(14), let system = number(15), Self.ticks > 0 else { return nil }
        return (user + system) / Self.ticks
    }

    /// Every process's `/proc/PID/stat` (those that end meanwhile are left out).
    public static func processes() -> [(pid: Int32, stat: ProcStat)] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let pid = Int32(entry), let stat = ProcStat(path: "/proc/\(entry)/stat") else { return nil }
            return (pid, stat)
        }
    }
}
