/// Waits, polling every `interval` seconds, while `condition` holds, for at most `seconds`
/// (default 30: far longer than anything takes on a quiet machine, so a loaded one passes too; a
/// condition met early returns at once). Returns whether it stopped holding. For end-to-end tests
/// that wait for a real process or socket to catch up; time rules themselves are tested on an
/// injected clock (`TestClock`).
public func waitWhile(upTo seconds: Double = 30, every interval: Double = 0.02, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + .milliseconds(Int64(seconds * 1_000))
    while try await condition() {
        if clock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(Int64(interval * 1_000)))
    }
    return true
}
