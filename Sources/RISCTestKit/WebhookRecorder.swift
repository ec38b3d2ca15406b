public import Synchronization

/// The site's side of a webhook test: answers `failures` requests with `failureStatus`, then
/// `successStatus`; keeps every request. Serve it with `LoopbackHTTPServer { recorder.handle($0) }`.
public final class WebhookRecorder: Sendable {
    public let requests = Mutex<[LoopbackHTTPServer.Request]>([])
    private let failuresLeft: Mutex<Int>
    private let failureStatus: Int
    private let successStatus: Int

    public init(failures: Int, failureStatus: Int = 503, successStatus: Int = 204) {
        failuresLeft = Mutex(failures)
        self.failureStatus = failureStatus
        self.successStatus = successStatus
    }

    public func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        requests.withLock { $0.append(request) }
        let fail = failuresLeft.withLock { left -> Bool in
            defer { left -= 1 }
            return left > 0
        }
        return .init(status: fail ? failureStatus : successStatus)
    }

    /// The bodies received, in order.
    public var bodies: [[UInt8]] { requests.withLock { $0.map(\.body) } }
}
