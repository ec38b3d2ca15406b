import Foundation
import Logging
import RISCCore
import RISCLocal
import RISCStorage
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Where `risc serve` reads its configuration again on SIGHUP: the same file, environment and
/// flags as at the start (`load`, which throws `ConfigurationError` naming every problem), and
/// how a new configuration differs from the running one (`compare`: RISCConfig's settings table
/// says which settings SIGHUP applies).
public struct ConfigurationSource: Sendable {
    public var load: @Sendable () throws -> ReceiverConfiguration
    public var compare: @Sendable (_ running: ReceiverConfiguration, _ new: ReceiverConfiguration) -> ConfigurationChanges

    public init(
        load: @escaping @Sendable () throws -> ReceiverConfiguration,
        compare: @escaping @Sendable (_ running: ReceiverConfiguration, _ new: ReceiverConfiguration) -> ConfigurationChanges
    ) {
        self.load = load
        self.compare = compare
    }
}

/// How a new configuration differs from the running one, by setting key: the settings SIGHUP
/// applies (`merged`: the running configuration with them taken from the new one) and those that
/// changed but wait for a restart.
public struct ConfigurationChanges: Sendable {
    public var applied: [String] = []
    public var needsRestart: [String] = []
    public var merged: ReceiverConfiguration

    public init(merged: ReceiverConfiguration) { self.merged = merged }
}

/// What one reload did: the settings applied, those that changed but wait for a restart, or
/// the problems that made it refuse the new configuration (the running one stays whole).
public struct ConfigurationReload: Sendable, Equatable {
    public var applied: [String] = []
    public var needsRestart: [String] = []
    public var problems: [String] = []
}

/// SIGHUP's configuration reload: reads the configuration as the start did, refuses it whole if
/// it would not start (its problems logged, the running settings kept, as nginx and Prometheus
/// do), else applies the reloadable settings to the parts that hold them.
final class ConfigurationReloader: Sendable {
    let source: ConfigurationSource
    private let running: Mutex<ReceiverConfiguration>
    let logLevel: LogLevelSetting?
    let push: PushEndpoint
    let storage: ReceiverStorage
    let retention: RetentionService
    let eventLog: any EventLog
    let logger: Logger
    /// The receiver's clock: the reload line's time.
    let clock: @Sendable () -> Double

    init(
        source: ConfigurationSource, running: ReceiverConfiguration, logLevel: LogLevelSetting?, push: PushEndpoint,
        storage: ReceiverStorage, retention: RetentionService, eventLog: any EventLog, logger: Logger, clock: @escaping @Sendable () -> Double
    ) {
        self.source = source
        self.running = Mutex(running)
        self.logLevel = logLevel
        self.push = push
        self.storage = storage
        self.retention = retention
        self.eventLog = eventLog
        self.logger = logger
        self.clock = clock
    }

    /// The configuration in force: the start's, with the reloadable settings of the last reload.
    var configuration: ReceiverConfiguration { running.withLock { $0 } }

    @discardableResult
    func reload() -> ConfigurationReload {
        var result = ConfigurationReload()
        var record = EventLogRecord(step: .config, outcome: .reloaded, time: clock())
        let old = configuration
        let new: ReceiverConfiguration
        do {
            new = try source.load()
            result.problems = new.problems + Receiver.preflight(new)
        } catch let error as ConfigurationError {
            return refuse(error.problems, record: record)
        } catch {
            return refuse(["\(error)"], record: record)
        }
        guard result.problems.isEmpty else { return refuse(result.problems, record: record) }
        let changes = source.compare(old, new)
        (result.applied, result.needsRestart) = (changes.applied, changes.needsRestart)
        let merged = changes.merged
        let credentials: [(name: String, credential: PushCredential, values: [String])]
        do {
            credentials = try pushCredentials(merged)
            try apply(merged)
        } catch let error as ConfigurationError {
            return refuse(error.problems, record: record)
        } catch {
            return refuse(["\(error)"], record: record)
        }
        for (name, credential, values) in credentials where credential.replace(with: values) {
            result.applied.append("transmitters.\(name).authorization_file")
        }
        running.withLock { $0 = merged }
        record["changed"] = .array(result.applied.map { .string($0) })
        if !result.needsRestart.isEmpty { record["restart_needed"] = .array(result.needsRestart.map { .string($0) }) }
        eventLog.record(record)
        logger.notice(
            result.applied.isEmpty ? "configuration reloaded (SIGHUP): nothing to change" : "configuration reloaded (SIGHUP)",
            metadata: result.applied.isEmpty ? [:] : ["risc.changed": "\(result.applied.joined(separator: ","))"])
        if !result.needsRestart.isEmpty {
            logger.warning(
                "these settings changed but take effect only at the next start",
                metadata: ["risc.restart_needed": "\(result.needsRestart.joined(separator: ","))"])
        }
        logLevel?.level = merged.logLevel  // last: the reload's own lines at the level it was asked at
        return result
    }

    /// Each running transmitter's push credential read again from its `authorization_file`
    /// (rotation: a second line is accepted beside the first); a file that does not read
    /// refuses the reload.
    private func pushCredentials(_ configuration: ReceiverConfiguration) throws -> [(name: String, credential: PushCredential, values: [String])] {
        try configuration.transmitters.compactMap { settings in
            guard let credential = push.intake.transmitters.all.first(where: { $0.name == settings.name })?.credential,
                let values = try settings.pushCredential()
            else { return nil }
            return (settings.name, credential, values)
        }
    }

    /// Hands the reloadable settings to what holds them; new requests, batches and passes use them.
    private func apply(_ configuration: ReceiverConfiguration) throws {
        if configuration.appliesToAccounts { try storage.store.updateInlineTable(configuration.appliedTable) }
        push.reload(Receiver.pushLimits(configuration, logger: logger), invalidPerMinute: configuration.invalidPerMinute)
        for worker in storage.workers { worker.update(table: configuration.appliedTable, retry: configuration.retry) }
        retention.update(configuration.retention)
    }

    private func refuse(_ problems: [String], record: EventLogRecord) -> ConfigurationReload {
        var record = record
        record.outcome = .refused
        record["problems"] = .array(problems.map { .string(String($0.prefix(300))) })
        eventLog.record(record)
        logger.error(
            "configuration not reloaded (SIGHUP): still running on the previous one",
            metadata: ["risc.problems": "\(problems.joined(separator: "; "))"])
        return ConfigurationReload(problems: problems)
    }
}

/// SIGHUP: reopens the event log file (log rotation), reloads the configuration's reloadable
/// settings and the TLS pairs (renewal).
struct HangupHandler: Service {
    let hangup: Hangup
    func run() async throws {
        await cancelWhenGracefulShutdown {
            for await _ in await UnixSignalsSequence(trapping: .sighup) { hangup.hangup() }
        }
    }
}

/// SIGHUP's work, apart from the receiver so the signal service can hold it.
struct Hangup: Sendable {
    let eventLog: JSONLinesEventLog
    let tls: ServerTLS?
    let adminTLS: ServerTLS?
    let metrics: ReceiverMetrics
    let logger: Logger
    /// Reads the configuration again; nil: SIGHUP does not (a receiver built without a source).
    let configuration: ConfigurationReloader?
    /// The receiver's clock: the reload lines' times and how long a certificate has left.
    let clock: @Sendable () -> Double

    /// Reopens the event log (log rotation), reloads the configuration's reloadable settings and,
    /// when serving HTTPS, the certificates and keys (renewal).
    func hangup() {
        eventLog.reopen()
        logger.notice("event log reopened (SIGHUP)")
        configuration?.reload()
        _ = reloadTLS()
    }

    /// The listeners that serve HTTPS, by the name metrics and the event log give them.
    var listeners: [(name: String, tls: ServerTLS)] {
        [("public", tls), ("admin", adminTLS)].compactMap { name, tls in tls.map { (name, $0) } }
    }

    /// Loads each HTTPS listener's certificate and key again (`tls.*`, `admin.tls.*`); new
    /// connections use them. A pair that does not load is logged and the one in use stays.
    /// Returns whether every listener that serves HTTPS (at least one) now uses a new pair.
    @discardableResult
    func reloadTLS() -> Bool {
        var reloaded = !listeners.isEmpty
        for (name, tls) in listeners {
            var record = EventLogRecord(step: .tls, outcome: .reloaded, time: clock())
            record["listener"] = .string(name)
            do {
                let loaded = try tls.reload()
                record["not_after"] = .string(Timestamp.iso8601(loaded.notValidAfter))
                eventLog.record(record)
                logger.info(
                    "TLS certificate reloaded", metadata: ["risc.listener": "\(name)", "risc.not_after": "\(Timestamp.iso8601(loaded.notValidAfter))"])
                noteCertificate(listener: name, notValidAfter: loaded.notValidAfter)
            } catch {
                record.outcome = .failed
                record["error"] = .string(String(describing: error).prefix(300).description)
                eventLog.record(record)
                logger.error(
                    "TLS certificate reload failed; still serving the previous one", metadata: ["risc.listener": "\(name)", "risc.error": "\(error)"])
                reloaded = false
            }
        }
        return reloaded
    }

    /// Publishes a listener's certificate expiry and warns when it is near (14 days) or past.
    func noteCertificate(listener: String, notValidAfter: Double) {
        metrics.noteCertificate(listener: listener, notValidAfter: notValidAfter)
        let left = notValidAfter - clock()
        let metadata: Logger.Metadata = ["risc.listener": "\(listener)", "risc.not_after": "\(Timestamp.iso8601(notValidAfter))"]
        if left <= 0 {
            logger.error(listener == "public" ? "the TLS certificate has expired: Google cannot deliver" : "the admin listener's TLS certificate has expired", metadata: metadata)
        } else if left < 14 * 86_400 {
            logger.warning("the TLS certificate expires within 14 days", metadata: metadata)
        }
    }
}
