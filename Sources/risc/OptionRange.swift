import ArgumentParser

/// Numbers on the command line that must be counts or ports: refused by name, with the value
/// given, before anything starts (exit 64). Found: a count of 0 or a port past 65,535 crashed a
/// bench, a drill and the development issuer (signal 4), and zero connections or threads sent
/// wrk off with arguments it refused, reported as wrk not being installed.
enum OptionRange {
    static func atLeast(_ minimum: Int, _ value: Int, _ name: String) throws {
        guard value >= minimum else { throw ValidationError("\(name) must be \(minimum) or more (it was \(value))") }
    }

    /// A count with an upper end: past it, what it multiplies or waits for has no meaning (and
    /// overflowed Int).
    static func within(_ range: ClosedRange<Int>, _ value: Int, _ name: String) throws {
        guard range.contains(value) else { throw ValidationError("\(name) must be from \(range.lowerBound) to \(range.upperBound) (it was \(value))") }
    }

    /// Seconds or a rate: finite and within `range`, or 0 where `orZero` (off, unlimited). Found:
    /// 1e300 seconds or a rate of 1e-300 crashed the command that waited that long (signal 4).
    static func within(_ range: ClosedRange<Double>, _ value: Double, _ name: String, orZero: Bool = false) throws {
        guard range.contains(value) || (orZero && value == 0) else {
            func shown(_ bound: Double) -> String { bound == bound.rounded() ? String(Int(bound)) : String(bound) }
            throw ValidationError(
                "\(name) must be \(orZero ? "0 or " : "")from \(shown(range.lowerBound)) to \(shown(range.upperBound)) (it was \(value))")
        }
    }

    /// A port to listen on; `following` more ports after it are used too (admin listeners, a
    /// second receiver); `lowest` 0 where the system may pick one (a server that says where it
    /// listens).
    static func port(_ value: Int, _ name: String = "--port", following: Int = 0, lowest: Int = 1) throws {
        let highest = 65_535 - following
        guard (lowest...highest).contains(value) else {
            throw ValidationError("\(name) must be a port from \(lowest) to \(highest) (it was \(value))")
        }
    }

    /// A path option's transform: an empty one (`--dir "$KEYS"` with the variable unset) is
    /// refused, never read as the current directory. Found: `risc keys generate --dir ''` wrote a
    /// private key wherever it was run, and `sign --keys ''` signed with whatever keys lay there.
    @Sendable static func path(_ value: String) throws -> String {
        guard !value.isEmpty else { throw ValidationError("a path must not be empty") }
        return value
    }
}
