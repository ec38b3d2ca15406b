import CRiscOpenSSL

/// A failure inside libcrypto, with OpenSSL's own error text. Never sent to a peer: goes into
/// `underlying` and the logs only.
public struct OpenSSLError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let detail: String

    public var description: String { detail.isEmpty ? operation : "\(operation): \(detail)" }

    /// Captures (and clears) the thread's OpenSSL error queue.
    static func capture(_ operation: String) -> OpenSSLError {
        var buffer = [CChar](repeating: 0, count: 256)
        risc_ossl_last_error(&buffer, buffer.count)
        let detail = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return OpenSSLError(operation: operation, detail: detail)
    }
}
