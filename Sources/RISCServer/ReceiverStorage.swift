import Foundation
public import Logging
import RISCClient
public import RISCCore
public import RISCStorage
import ServiceLifecycle

/// A receiver's storage: the store the configuration names (opened by the one factory,
/// `Storage`), the parts the receiver holds open, and the `QueueWorker`s on its queue (retries,
/// webhook deliveries, unlink notices; new SETs' actions are applied as they are stored).
public struct ReceiverStorage: Sendable {
    public let store: Storage
    public let events: any EventStore & StoreHealth
    public let accounts: any AccountRepository
    /// The token-fingerprint key the store matches tokens with.
    let tokenKey: [UInt8]
    public let workers: [QueueWorker]

    /// Opens the store `configuration` names; a shared one is only opened here (`prepare` talks
    /// to the server). `noticeKeys`: the receiver's unlink-notice keys, which its public listener
    /// also publishes (read from the configuration when not given).
    /// `journal`: the receiver's own store, whose pushed SETs go through the embedded store's journal.
    /// `clock`: the workers' time (when work is due, their backoff and idle polls; the wall clock by
    /// default), and the times the store records.
    public static func open(
        configuration: ReceiverConfiguration, log: any EventLog, metrics: (any WorkMetrics)? = nil, logger: Logger,
        noticeKeys: TransmitterKeyCache? = nil, journal: Bool = false, clock: @escaping @Sendable () -> Double = systemNow
    ) throws -> ReceiverStorage {
        let sink = try makeSink(configuration: configuration)
        let publisher = try makePublisher(configuration: configuration, keys: noticeKeys)
        let store = try Storage(
            settings: configuration.store, dataDirectory: configuration.dataDirectory, tokenKeyFile: configuration.tokenKeyFile, logger: logger,
            clock: clock)
        do {
            let events = try store.events(), accounts = try store.accounts(), queue = try store.queue(), tokenKey = try store.tokenKey()
            let shape = try store.workerShape(webhook: sink != nil)
            let workers = makeWorkers(
                queue: queue, tokenKey: tokenKey, shape: shape, configuration: configuration, sink: sink, publisher: publisher, log: log,
                metrics: metrics, logger: logger, clock: clock)
            // Unless the webhook takes every SET, the store's accounts are the sink: each SET's
            // actions are applied in the transaction that stores it (one whose row names the
            // webhook is left to the workers).
            if configuration.appliesToAccounts { try store.enableInlineActions(table: configuration.appliedTable, log: log) }
            if journal { try store.openJournal(log: log) }
            return ReceiverStorage(store: store, events: events, accounts: accounts, tokenKey: tokenKey, workers: workers)
        } catch {
            store.close()
            throw error
        }
    }

    /// `count` workers over `queue` (each an owner of its own), applying to the accounts or
    /// delivering to `sink`; with `publisher`, one more that publishes unlink notices alone.
    static func makeWorkers(
        queue: any WorkQueue, tokenKey: [UInt8], shape: Storage.WorkerShape, configuration: ReceiverConfiguration, sink: (any ActionSink)?,
        publisher: (any NoticePublisher)?, log: any EventLog, metrics: (any WorkMetrics)?, logger: Logger, clock: @escaping @Sendable () -> Double
    ) -> [QueueWorker] {
        let batch = shape.batch
        // A webhook claim must outlive its deliveries: a batch of slow answers is not a dead receiver.
        let lease = sink == nil ? configuration.queueLease : max(configuration.queueLease, Double(batch) * (configuration.webhookTimeout + 5) + 30)
        var workers = (0..<shape.count).map { _ in
            var settings = QueueWorker.Settings()
            settings.batch = batch
            settings.lease = lease
            settings.scope = publisher == nil ? .all : .sets
            settings.deferWhile = shape.deferWhile
            settings.webhookScope = configuration.webhookScope
            return QueueWorker(
                queue: queue, settings: settings, table: configuration.appliedTable, retry: configuration.retry, sink: sink, log: log,
                metrics: metrics, logger: logger, clock: clock)
        }
        if let publisher {
            // Notices a few per claim, the lease outliving their calls.
            var settings = QueueWorker.Settings()
            settings.batch = 4
            settings.lease = max(configuration.queueLease, 4 * (configuration.noticePublisher.timeout + 5) + 30)
            settings.scope = .notices
            workers.append(
                QueueWorker(
                    queue: queue, settings: settings, retry: configuration.retry, notices: NoticeSending(publisher: publisher, tokenKey: tokenKey),
                    log: log, metrics: metrics, logger: logger, clock: clock))
        }
        return workers
    }

    /// The webhook sink, when `webhook.url` is set (every SET's, or the chosen rows').
    static func makeSink(configuration: ReceiverConfiguration) throws -> (any ActionSink)? {
        guard let url = configuration.webhookURL, let secretFile = configuration.webhookSecretFile else { return nil }
        let secret = try Receiver.readSecret(secretFile, setting: "webhook.secret_file")
        return try WebhookSink(url: url, secret: secret, timeout: configuration.webhookTimeout, caFile: configuration.webhookCAFile)
    }

    /// The unlink-notice keys, when `linking.notices.issuer` is set: read now, so a missing or
    /// unusable directory stops the start.
    /// A directory that breaks later keeps its last good keys, logged once when it breaks and
    /// once when it loads again (and shown by `/readyz` and `risc_notice_keys_ok`).
    static func noticeKeys(
        configuration: ReceiverConfiguration, logger: Logger? = nil, clock: @escaping @Sendable () -> Double = systemNow
    ) throws -> TransmitterKeyCache? {
        guard configuration.noticeIssuer != nil, let directory = configuration.noticeKeyDirectory else { return nil }
        do {
            return try TransmitterKeyCache(directory: directory, clock: clock) { problem in
                if let problem {
                    logger?.error("the notice key directory does not load; signing with its last good keys", metadata: ["risc.error": "\(problem)"])
                } else {
                    logger?.notice("the notice key directory loads again", metadata: ["risc.directory": "\(directory)"])
                }
            }
        } catch { throw ConfigurationError(problems: ["linking.notices: \(error)"]) }
    }

    /// The unlink-notice publisher, when `linking.notices.issuer` is set, signing with `keys` (read
    /// from the configuration when not given); the service account is read now too.
    static func makePublisher(configuration: ReceiverConfiguration, keys: TransmitterKeyCache? = nil) throws -> (any NoticePublisher)? {
        guard let keys = try keys ?? noticeKeys(configuration: configuration), let accountFile = configuration.noticeServiceAccountFile else {
            return nil
        }
        do {
            return try GoogleNoticePublisher(settings: configuration.noticePublisher, keys: keys, account: try ServiceAccount(keyFile: accountFile))
        } catch {
            throw ConfigurationError(problems: ["linking.notices: \(error)"])
        }
    }

    /// `embedded` or `postgresql`, for the event log and `/readyz`.
    public var backendName: String { store.backendName }
    public var health: any StoreHealth { events }

    func start() throws {
        for worker in workers { worker.start() }
        let workers = self.workers
        try store.wakeOnWork { for worker in workers { worker.wake() } }
    }

    /// Each worker finishes the batch in hand (a notice's call may take linking.notices.timeout),
    /// together; then the store closes.
    func stop() async {
        await withTaskGroup(of: Void.self) { group in
            for worker in workers { group.addTask { await worker.stop() } }
        }
        store.close()
    }

    /// The storage as a service of the receiver's group: its workers start with the group and, on
    /// shutdown, finish the batch in hand before the store closes (the group stops it after
    /// everything started after it, the listeners included).
    struct StorageService: Service {
        let storage: ReceiverStorage

        func run() async throws {
            try storage.start()
            try? await gracefulShutdown()
            await storage.stop()
        }
    }
}
