#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `bytes` to `descriptor`, retrying short writes and EINTR; gives up on any other
/// error (a closed descriptor must not spin), with `errno` set. Returns how many bytes were written.
@discardableResult
public func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Int { writeAll(descriptor, bytes[...]) }

/// `writeAll` of a part of an array; the count written, from the part's start.
@discardableResult
public func writeAll(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>) -> Int {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { break }
        offset += written
    }
    return offset - bytes.startIndex
}
