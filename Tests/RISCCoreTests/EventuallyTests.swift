import Foundation
import RISCTestKit
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `waitWhile`, the end-to-end tests' wait for a real process or socket.
@Suite("waitWhile")
struct EventuallyTests {
    @Test("its bound counts polls, not the wall clock: time not run between two looks (a busy pool) does not end the wait before the next one")
    func stallNotCounted() async {
        let looks = Atomic(0)
        // The first look holds its thread for 0.3 s, past the whole 0.1 s bound, as a test kept
        // waiting for a thread of a busy pool is; the third finds the condition gone.
        let ended = await waitWhile(upTo: 0.1, every: 0.05) {
            let look = looks.add(1, ordering: .relaxed).newValue
            if look == 1 { usleep(300_000) }
            return look < 3
        }
        #expect(ended)
        #expect(looks.load(ordering: .relaxed) == 3)
        // A condition that holds ends the wait once the polls are spent, false.
        let never = Atomic(0)
        #expect(await !waitWhile(upTo: 0.1, every: 0.05) { never.add(1, ordering: .relaxed).newValue > 0 })
        #expect(never.load(ordering: .relaxed) == 3)
    }
}
