public import Logging

extension Logger {
    /// The one line a store's migration leaves at notice: `store created` for a new store (schema
    /// 0, nothing to migrate from), else `store schema migrated` with the versions before and after.
    public func noteMigration(store: String, from: some BinaryInteger, to: some BinaryInteger) {
        let (from, to) = (Int(from), Int(to))
        if from == 0 {
            notice("store created", metadata: ["risc.store": "\(store)", "risc.schema": .stringConvertible(to)])
        } else {
            notice("store schema migrated", metadata: ["risc.store": "\(store)", "risc.from": .stringConvertible(from), "risc.to": .stringConvertible(to)])
        }
    }
}
