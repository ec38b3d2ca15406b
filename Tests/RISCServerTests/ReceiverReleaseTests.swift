import Foundation
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Testing

@Suite("What is let go is closed: a stopped receiver's storage, a test issuer")
struct ReceiverReleaseTests {
    // Finding: every receiver a process started and stopped on the embedded store kept its event
    // store, its queue's worker and the queue (with the queue's thread and its database
    // connection) for good: the store's after-commit hook held the workers, and the worker's
    // "defer while the writer is busy" check held the store. A test process held 84 of them at
    // the end of this target's tests (84 `risc.queue` threads, about 500 descriptors).
    @Test("the embedded store, its queue and its worker are released once the receiver is stopped and let go")
    func embeddedStorageReleased() async throws {
        weak var receiver: Receiver?
        weak var events: AnyObject?
        weak var queue: AnyObject?
        weak var worker: AnyObject?
        do {
            let harness = try ServerHarness()
            defer { try? FileManager.default.removeItem(atPath: harness.dataDirectory) }
            try await harness.start()
            #expect(try await harness.post(try harness.token()).status == 202)
            receiver = harness.receiver
            events = harness.receiver.storage.events as AnyObject
            queue = try harness.receiver.storage.store.queue() as AnyObject
            worker = harness.receiver.storage.workers.first
            #expect(worker != nil)
            try await harness.stop()
            harness.receiver = nil
            harness.task = nil
        }
        #expect(await waitWhile { receiver != nil }, "the receiver itself")
        #expect(await waitWhile { events != nil }, "the event store")
        #expect(await waitWhile { worker != nil }, "the queue's worker")
        #expect(await waitWhile { queue != nil }, "the queue")
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        guard let fd = try? RawConnection.connected(port: port) else { return false }
        close(fd)
        return true
    }

    // Finding (the test kit's): a harness's loopback issuer was never stopped unless a test did so
    // by hand, and its server's accept thread held the server: 23 such threads and their
    // listening sockets were left at the end of `swift test`.
    @Test("a loopback issuer let go stops its server: its port refuses connections")
    func issuerReleased() throws {
        var port = 0
        do {
            let issuer = try LocalIssuer(jwks: #"{"keys":[]}"#)
            port = Int(issuer.baseURL.split(separator: ":").last ?? "") ?? 0
            #expect(Self.accepts(port: port))
        }
        #expect(!Self.accepts(port: port))
    }
}
