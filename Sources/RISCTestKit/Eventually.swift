/// Waits, polling every `interval` seconds, while `condition` holds, for at most `seconds` of
/// polling (default 30: far longer than anything takes on a quiet machine, so a loaded one passes
/// too; a condition met early returns at once). Returns whether it stopped holding. For end-to-end
/// tests that wait for a real process or socket to catch up; time rules themselves are tested on
/// an injected clock (`TestClock`).
///
/// The bound counts polls (`seconds / interval` of them), not the time between them: when every
/// suite starts at once, two cores' cooperative threads are shared by hundreds of tests for the
/// first half-minute (a test of milliseconds then finishes 28–35 s after it started), and a wait on
/// the wall clock gave up on its first look after such a wait, before the work it waited for had run.
public func waitWhile(upTo seconds: Double = 30, every interval: Double = 0.02, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let polls = max(1, Int((seconds / interval).rounded(.up)))
    for _ in 0..<polls {
        guard try await condition() else { return true }
        try? await Task.sleep(for: .milliseconds(Int64(interval * 1_000)))
    }
    return !(try await condition())
}
