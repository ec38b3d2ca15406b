import Foundation
import RISCCore

/// Runs a program found on PATH (through `env`) and returns its standard output, or nil if it
/// could not run. A `ChildProcess`: the child starts with an empty signal mask and default
/// dispositions (Swift's runtime blocks signals such as SIGALRM on its threads, and a child that
/// inherited that mask never saw the alarm `openssl speed` times itself with), its standard error
/// to /dev/null.
func runWithDefaultSignals(_ arguments: [String]) -> String? {
    let child = ChildProcess()
    child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    child.arguments = arguments
    child.standardError = FileHandle.nullDevice
    guard let finished = try? child.runToEnd() else { return nil }
    // env's own statuses: the program was not found (127) or could not be run (126).
    if finished.reason == .exit, finished.status == 126 || finished.status == 127 { return nil }
    return String(decoding: finished.output, as: UTF8.self)
}
