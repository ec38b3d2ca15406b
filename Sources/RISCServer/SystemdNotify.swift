public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol (`Type=notify`, sd_notify(3)) without libsystemd: one datagram
/// to the Unix socket named by `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
/// Without the variable (not started by systemd) it does nothing.
public enum SystemdNotify {
    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`); false when there is no socket or it
    /// cannot be reached (systemd then times the start out, which is the right failure).
    @discardableResult
    public static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.utf8.count < 108 else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sockaddrPointer, length) }
            }
        }
        return sent == message.count
    }
}
