import Foundation
import RISCPostgres

/// `store.url`, parsed once when the configuration is loaded: the shared PostgreSQL store.
/// `description` is safe to log (no password can be in it; see `PostgresStoreURL`).
public struct StoreURL: Sendable, Equatable, CustomStringConvertible {
    let postgres: PostgresStoreURL
    /// The text it was read from, for a child process's `--store-url`.
    public let text: String

    public init(_ text: String) throws(StoreURLError) {
        do { postgres = try PostgresStoreURL(text) } catch { throw StoreURLError(description: error.description) }
        self.text = text
    }

    public var description: String { postgres.description }

    /// Why `store.password_file` may not be used with this URL (nil when it may).
    public var passwordProblem: String? { postgres.passwordProblem }
}

/// A `store.url` that cannot be used, with why (a configuration problem).
public struct StoreURLError: Error, CustomStringConvertible {
    public let description: String
}

/// `store.*`: which store a receiver or a command uses, and how to reach it.
public struct StoreSettings: Sendable, Equatable {
    /// `store.url`: the shared PostgreSQL store; nil, the embedded SQLite store in the data directory.
    public var url: StoreURL?
    /// `store.password_file`: the PostgreSQL password (never in the URL).
    public var passwordFile: String?
    /// `store.ca_file`: CA bundle verifying the PostgreSQL server.
    public var caFile: String?
    /// `store.accept_unsafe_durability`: accept a server with `fsync`/`synchronous_commit` off.
    public var acceptUnsafeDurability = false
    /// `store.timeout`: seconds a SET may wait for the shared store's COMMIT before it is answered 503.
    public var timeout: Double = 5

    public init(url: StoreURL? = nil) { self.url = url }

    /// `embedded` or `postgresql`, for the event log, `/readyz` and commands' output.
    public var backendName: String { url == nil ? "embedded" : "postgresql" }

    /// What is wrong with these settings (a password file over a connection that would not protect it).
    public var problems: [String] {
        guard passwordFile != nil, let problem = url?.passwordProblem else { return [] }
        return [problem]
    }
}
