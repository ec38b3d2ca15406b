public import Logging
public import Synchronization

/// A logger that keeps every entry, at any level, as `LEVEL message key=value…` lines.
public final class CapturedLog: Sendable {
    public let lines = Mutex<[String]>([])

    public init() {}

    public var logger: Logger {
        var logger = Logger(label: "captured") { _ in Handler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let entry = "\(event.level) \(event.message) \((event.metadata ?? [:]).map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
            log.lines.withLock { $0.append(entry) }
        }
    }
}
