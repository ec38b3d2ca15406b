#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `bytes` to `descriptor`, retrying short writes and EINTR; gives up on any other
/// error (a closed descriptor must not spin), with `errno` set. Returns how many bytes were written.
@discardableResult
public func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Int {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return offset }
        offset += written
    }
    return offset
}
