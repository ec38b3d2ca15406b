/// A failure of the storage, whichever the driver: one type with a stable code, so the server and
/// the commands decide by the code (answer 503 and let the transmitter retry, or refuse to start
/// with exit 64), never by a driver's own types.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// Cannot run as configured: the server does not promise durability, a token key that is
        /// not the store's, an unreadable password or CA file, a data directory another receiver
        /// holds, a store that is not empty where an empty one is needed. Fix it, then start again.
        case refused
        /// The store cannot be reached now (a server down or not up yet): temporary.
        case unavailable
        /// The store did not answer within its deadline: temporary.
        case timeout
        /// The store is closed (shutting down, or refusing writes after an fsync failed).
        case closed
        /// The disk is full.
        case diskFull = "disk_full"
        /// Any other failure of the store's own (I/O, a constraint, a row that should be there):
        /// temporary from the sender's side, answered 503.
        case failed
    }

    public let code: Code
    /// The driver's own code (SQLite's result code), when it has one.
    public let driverCode: Int32?
    public let description: String

    public init(_ code: Code, _ description: String, driverCode: Int32? = nil) {
        self.code = code
        self.description = description
        self.driverCode = driverCode
    }

    /// Whether `error` is a store that will not run as configured (exit 64, no retry).
    public static func isRefusal(_ error: any Error) -> Bool { (error as? StoreError)?.code == .refused }
}

extension StoreError {
    /// A store whose schema a newer risc migrated (after a rollback): this binary would not know
    /// what the newer schema means, so it refuses the store.
    public static func newerSchema(found: Int64, known: Int64, store: String) -> StoreError {
        StoreError(
            .refused,
            """
            \(store)'s schema is version \(found), and this risc knows versions up to \(known): a newer risc migrated it. Run that \
            version (docs/operations.md, upgrades and rollback), or restore the backup taken before the upgrade
            """)
    }
}
