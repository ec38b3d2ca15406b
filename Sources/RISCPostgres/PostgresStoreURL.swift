import Foundation
import RISCCore

/// `store.url`: where the shared PostgreSQL store is.
///
/// `postgres://USER@HOST:PORT/DATABASE`, with `?host=/socket/dir` for a Unix socket (HOST is then
/// only a label) and `sslmode=disable|require|verify-full` for TLS over TCP (default `require`,
/// `verify-full` checks the server's certificate against `store.ca_file`, or the system's CAs). A
/// password in the URL is refused: it would end up in shell histories, process lists and logs;
/// it comes from `store.password_file` instead. `description` is safe to log.
public struct PostgresStoreURL: Sendable, Equatable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, CaseIterable {
        case disable
        case require
        case verifyFull = "verify-full"
    }

    public let user: String
    public let host: String
    public let port: Int
    public let database: String
    /// The directory of the server's Unix socket, when connecting through it.
    public let socketDirectory: String?
    public let tls: TLSMode

    /// A URL that cannot be used, with why.
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public init(_ text: String) throws(Invalid) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw Invalid(description: "store.url is not a URL: expected postgres://USER@HOST:PORT/DATABASE")
        }
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw Invalid(description: "store.url must start with postgres:// (got \(scheme)://)")
        }
        guard components.password == nil else {
            throw Invalid(description: "store.url must not carry a password: put it in the file store.password_file names")
        }
        guard let user = components.user, !user.isEmpty else { throw Invalid(description: "store.url names no user (postgres://USER@HOST/DATABASE)") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty else { throw Invalid(description: "store.url names no database (postgres://USER@HOST/DATABASE)") }
        guard !database.contains("/") else {
            throw Invalid(description: "store.url: the database is the one path segment after the host, got '\(Printable.safe(database, maxBytes: 80))'")
        }
        var socket: String?
        var tls = TLSMode.verifyFull
        for item in components.queryItems ?? [] {
            switch item.name {
            case "host":
                guard let value = item.value, value.hasPrefix("/") else { throw Invalid(description: "store.url: host= must be the socket's directory, an absolute path") }
                socket = value
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw Invalid(description: "store.url: sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                tls = mode
            default:
                throw Invalid(description: "store.url: unknown parameter '\(item.name)' (known: host, sslmode)")
            }
        }
        guard let host = components.host, !host.isEmpty || socket != nil else { throw Invalid(description: "store.url names no host") }
        let port = components.port ?? 5432
        guard (1...65_535).contains(port) else { throw Invalid(description: "store.url: port must be 1–65535") }
        self.user = user
        // An IPv6 address comes in brackets (`[::1]`); connecting takes it without them.
        self.host = host.isEmpty ? "localhost" : host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = port
        self.database = database
        self.socketDirectory = socket
        // A Unix socket never carries TLS.
        self.tls = socket == nil ? tls : .disable
    }

    /// Why a password may not be used with this URL: over TCP without `verify-full`, the server
    /// answering is not authenticated, and it may ask for the password in clear or as MD5 (the
    /// client answered a fake server's cleartext request with it before). nil when it may.
    public var passwordProblem: String? {
        guard socketDirectory == nil, tls != .verifyFull else { return nil }
        return
            "store.password_file is sent only over sslmode=verify-full (the server's certificate checked; pin its CA with store.ca_file) or the Unix socket (?host=/socket/dir); \(description) would send it to a server nobody checked"
    }

    /// The socket file PostgreSQL listens on in `socketDirectory`.
    public var socketPath: String? { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } }

    /// The URL again, its user and database escaped (an Azure user is `name@server`).
    public var description: String {
        func escaped(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
        }
        return "postgres://\(escaped(user))@\(hostPort(host, port))/\(escaped(database))" + (socketDirectory.map { "?host=\($0)" } ?? "?sslmode=\(tls.rawValue)")
    }
}
