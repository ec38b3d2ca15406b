import Foundation

/// Now, in seconds since the epoch, from the system: what every injected clock defaults to (the
/// receiver's clock, the stores', the workers', the services'), and what the command-line edges
/// read directly. Tests give their own clock instead (docs/architecture.md, "Time").
@Sendable public func systemNow() -> Double { Date().timeIntervalSince1970 }

/// Seconds since boot, never set back: the clock deadlines default to where a command waits on a
/// server (a minute a call on a shared store).
@Sendable public func systemUptime() -> Double { ProcessInfo.processInfo.systemUptime }
