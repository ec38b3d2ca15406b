import Foundation
import Logging
import RISCClient
import RISCCore
import RISCServer
import RISCStorage
import RISCTestKit
import Synchronization
import Testing

@testable import RISCSQLite

/// A plain TCP exchange: write the bytes, read until the server closes (or 5 s pass).
enum RawConnection {
    /// Sends `head`, then zeros up to `bodyBytes`, until a send fails (the server closed); returns
    /// how many body bytes went out.
    static func sendUntilClosed(port: Int, head: String, bodyBytes: Int) throws -> Int {
        let fd = try connected(port: port)
        defer { close(fd) }
        _ = Array(head.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let chunk = [UInt8](repeating: 0, count: 65_536)
        var sent = 0
        while sent < bodyBytes {
            let count = chunk.withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, bodyBytes - sent), Int32(MSG_NOSIGNAL)) }
            if count <= 0 { break }
            sent += count
        }
        return sent
    }

    /// Sends `bytes`; with `then`, waits for the first answer bytes before sending those.
    static func exchange(port: Int, _ bytes: [UInt8], then more: [UInt8]? = nil) throws -> String {
        let fd = try connected(port: port)
        defer { close(fd) }
        try sendAll(fd, bytes)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        if let more {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += buffer[0..<count] }
            try sendAll(fd, more)
        }
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// A connection kept open across exchanges.
    final class Held {
        let fd: Int32
        /// `source`: the local address to connect from (any of 127/8 works on loopback).
        init(port: Int, source: String? = nil) throws { fd = try RawConnection.connected(port: port, source: source) }
        deinit { close(fd) }

        /// Sends `bytes` and reads one bodiless answer (to the blank line); nil when the server
        /// closed (or reset) the connection first.
        func exchange(_ bytes: [UInt8]) -> String? {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !received.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return nil }
                received += buffer[0..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }

        /// Sends `bytes`; false once the server has closed the connection.
        func feed(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count && isOpen
        }

        /// Whether the server has not closed its side (nothing unread is expected).
        var isOpen: Bool {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
            return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
        }
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw POSIXError(.EIO)
        }
    }

    static func connected(port: Int, source: String? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                throw POSIXError(.EADDRNOTAVAIL)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        return fd
    }
}
