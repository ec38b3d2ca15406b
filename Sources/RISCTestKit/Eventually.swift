/// Waits, polling every `interval` seconds, while `condition` holds, for at most `seconds` of
/// polling (default 30: far longer than anything takes on a quiet machine, so a loaded one passes
/// too; a condition met early returns at once). Returns whether it stopped holding. For end-to-end
/// tests that wait for a real process or socket to catch up; time rules themselves are tested on
/// an injected clock (`TestClock`).
///
/// The bound counts polls (`seconds / interval` of them), not the time between them: a stall of
/// the whole test process (CI saw one of 30–40 s, every test in it held at once) made a wait on
/// the wall clock give up on its first look after it, before the work it waited for had run again.
public func waitWhile(upTo seconds: Double = 30, every interval: Double = 0.02, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let polls = max(1, Int((seconds / interval).rounded(.up)))
    for _ in 0..<polls {
        guard try await condition() else { return true }
        try? await Task.sleep(for: .milliseconds(Int64(interval * 1_000)))
    }
    return !(try await condition())
}
