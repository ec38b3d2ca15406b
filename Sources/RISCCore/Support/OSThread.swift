#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A dedicated OS thread for blocking work (the store's writer, the event log's flusher).
///
/// Made with `pthread_create` directly: such loops block for their whole life, and must never
/// sit on a thread Swift concurrency or libdispatch also schedules work on (seen here: on Linux,
/// Foundation's `Thread` ran its block on a libdispatch worker).
public enum OSThread {
    final class Start: @unchecked Sendable {  // reason: immutable, handed to exactly one new thread
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new detached thread named `name` (at most 15 characters are kept).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Start(name: String(name.prefix(15)), body: body)
        let argument = Unmanaged.passRetained(start).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, osThreadEntry, argument)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_detach(thread)
    }

    /// Names the calling thread as `top -H` and `ps -L` show it.
    static func nameCurrentThread(_ name: String) {
        #if os(Linux)
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        _ = name.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        #endif
    }
}

private func osThreadEntry(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let start = Unmanaged<OSThread.Start>.fromOpaque(argument!).takeRetainedValue()
    OSThread.nameCurrentThread(start.name)
    start.body()
    return nil
}
