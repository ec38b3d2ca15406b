import Foundation
import RISCCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A small real HTTP/1.1 server on 127.0.0.1 for tests and `risc dev-issuer`: one thread accepts,
/// each connection is served on its own thread, one request per connection.
///
/// The handler sees every request and decides the answer, so tests can serve discovery
/// documents and key sets, count fetches, answer 304 to `If-None-Match`, fail on purpose, or
/// stall.
public final class LoopbackHTTPServer: Sendable {
    public struct Request: Sendable {
        public let method: String
        public let path: String
        public let headers: [(name: String, value: String)]
        public let body: [UInt8]
        public func header(_ name: String) -> String? {
            headers.last { $0.name == name.lowercased() }?.value
        }
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]
        public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
            self.status = status
            self.headers = headers
            self.body = body
        }
        public static func json(_ text: String, status: Int = 200, headers: [(name: String, value: String)] = []) -> Response {
            Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
        }
    }

    public typealias Handler = @Sendable (Request) -> Response

    private let listener: Int32
    public let port: Int
    private let handler: Handler
    private let state = Mutex<(stopped: Bool, requests: Int)>((false, 0))
    private let done = DispatchSemaphore(value: 0)

    /// The port could not be listened on: which, and why.
    public struct ListenError: Error, CustomStringConvertible {
        public let port: Int
        public let errno: Int32
        public var description: String {
            let cause = errno == EADDRINUSE ? "the port is in use (another process listens there)" : String(cString: strerror(errno))
            return "cannot listen on 127.0.0.1:\(port): \(cause)"
        }
    }

    /// Starts listening on 127.0.0.1 (`port` 0 picks a free one).
    public init(port: Int = 0, handler: @escaping Handler) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let code = errno
            close(fd)
            throw ListenError(port: port, errno: code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.listener = fd
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        self.handler = handler
        OSThread.start(name: "test.http") { [self] in acceptLoop() }
    }

    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Requests answered so far.
    public var requestCount: Int { state.withLock { $0.requests } }

    /// Stops accepting; returns once the accept thread has ended. The accept thread holds the
    /// server until then, so a server is stopped by hand or by its owner's `deinit` (`LocalIssuer`).
    public func stop() {
        let wasRunning = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard wasRunning else { return }
        // Wake the accept thread (accept fails on a shut-down listener), wait for it, then close:
        // closing first let the descriptor number be reused by another server's listener in the
        // same process, whose connections this thread then accepted and dropped.
        shutdown(listener, Int32(SHUT_RDWR))
        done.wait()
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            if state.withLock({ $0.stopped }) {
                close(client)
                break
            }
            OSThread.start(name: "test.http.conn") { [self] in serve(client) }
        }
        done.signal()
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var headerEnd: Int?
        while headerEnd == nil {
            let n = read(client, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            buffer.append(contentsOf: chunk[0..<n])
            headerEnd = Self.find([13, 10, 13, 10], in: buffer)
            if buffer.count > 1 << 20 { return }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return }
        let headers: [(name: String, value: String)] = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.last { $0.name == "content-length" }.flatMap { Int($0.value) } ?? 0
        var body = Array(buffer[(headerEnd! + 4)...])
        while body.count < length {
            let n = read(client, &chunk, min(chunk.count, length - body.count))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            body.append(contentsOf: chunk[0..<n])
        }
        let request = Request(
            method: String(requestLine[0]), path: String(requestLine[1]), headers: headers, body: Array(body.prefix(length)))
        state.withLock { $0.requests += 1 }
        let response = handler(request)
        var text = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        writeAll(client, Array(text.utf8) + response.body)
        // Close gracefully: send FIN, then drain until the client closes, so the kernel never
        // answers leftover bytes with a reset the client would see as a receive failure.
        shutdown(client, Int32(SHUT_WR))
        var drainTimeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &drainTimeout, socklen_t(MemoryLayout<timeval>.size))
        while read(client, &chunk, chunk.count) > 0 {}
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
