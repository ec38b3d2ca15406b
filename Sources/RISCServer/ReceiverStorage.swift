import Foundation
import Logging
import RISCClient
import RISCCore
import RISCPostgres
import RISCSQLite
import ServiceLifecycle
import Synchronization

/// The one factory that gives a receiver its storage, as the configuration chooses: the embedded
/// SQLite store in the data directory (no `store.url`), or a PostgreSQL store shared by several
/// receivers. Everything else in the receiver talks to the ports.
///
/// The embedded store keeps its own machinery (group commit with pipelined fsync, checkpoints,
/// actions applied inline in the transaction that stores a SET); both run `QueueWorker`s over their
/// `WorkQueue` for what is not applied inline (retries, webhook deliveries, unlink notices).
public enum ReceiverStorage: Sendable {
    case embedded(EmbeddedStorage)
    case shared(SharedStorage)

    /// The embedded store and what works on it.
    public struct EmbeddedStorage: Sendable {
        /// The driver's one owner; the parts below are its.
        public let owner: SQLiteStore
        public let store: SQLiteEventStore
        public let queue: EmbeddedWorkQueue
        /// The queue's worker, and one that publishes unlink notices when they are on.
        public let workers: [QueueWorker]
        public let accounts: AccountStore
    }

    /// Workers a receiver runs on the shared store. Each claims its own batches (`SKIP LOCKED`),
    /// so while one waits for the server or for the webhook, the others work: applying actions is
    /// round trips to the server more than it is work for either side.
    public static let sharedWorkers = 4

    /// The shared store, its workers, and the listener that wakes them.
    public final class SharedStorage: Sendable {
        public let store: SharedStore
        public let workers: [QueueWorker]
        private let listener = Mutex<Task<Void, Never>?>(nil)

        init(store: SharedStore, workers: [QueueWorker]) {
            self.store = store
            self.workers = workers
        }

        func start() {
            for worker in workers { worker.start() }
            let workers = self.workers, queue = store.queue
            let wake: @Sendable () -> Void = { for worker in workers { worker.wake() } }
            store.events.afterCommit.withLock { $0 = wake }
            listener.withLock { $0 = Task { await queue.listen(wake: wake) } }
        }

        func stop() async {
            listener.withLock { $0 }?.cancel()
            await ReceiverStorage.stop(workers)
            store.close()
        }
    }

    /// Opens the store `configuration` names. The shared one is only opened here; `prepare`
    /// talks to the server.
    /// `noticeKeys`: the receiver's unlink-notice keys, which its public listener also publishes
    /// (read from the configuration when not given).
    public static func open(
        configuration: ReceiverConfiguration, log: any EventLog, metrics: (any WorkMetrics)? = nil, logger: Logger,
        noticeKeys: TransmitterKeyCache? = nil
    ) throws -> ReceiverStorage {
        let sink = try makeSink(configuration: configuration)
        let publisher = try makePublisher(configuration: configuration, keys: noticeKeys)
        guard let url = configuration.storeURL else {
            let owner = SQLiteStore(directory: configuration.dataDirectory, tokenKeyFile: configuration.tokenKeyFile, logger: logger)
            let store = try owner.events()
            let accounts = try owner.accountStore()
            let queue = try owner.queue()
            // One worker: the store has one writer. It waits while acknowledgements do.
            let workers = makeWorkers(
                queue: queue, tokenKey: queue.tokenKey, count: 1, batch: 8, configuration: configuration, sink: sink, publisher: publisher,
                log: log, metrics: metrics, logger: logger, deferWhile: { store.isBusy })
            if sink == nil {
                // Embedded account store: apply each SET's actions in the transaction that stores it.
                try store.enableInlineActions(
                    table: configuration.actionTable, log: log, directory: configuration.dataDirectory,
                    tokenKeyFile: configuration.tokenKeyFile)
            }
            store.afterCommit = { for worker in workers { worker.wake() } }
            return .embedded(EmbeddedStorage(owner: owner, store: store, queue: queue, workers: workers, accounts: accounts))
        }
        var settings = SharedStore.Settings(
            url: url, passwordFile: configuration.storePasswordFile, caFile: configuration.storeCAFile, tokenKeyFile: configuration.tokenKeyFile)
        settings.acceptUnsafeDurability = configuration.storeAcceptUnsafeDurability
        settings.timeout = configuration.storeTimeout
        let store = try SharedStore(settings: settings, logger: logger)
        if sink == nil { store.enableInlineActions(table: configuration.actionTable) }
        // Applied in the store, a batch is one transaction (the worker only retries what failed
        // inline). Webhook deliveries go one at a time, so their batch stays small.
        let workers = makeWorkers(
            queue: store.queue, tokenKey: store.tokenKey, count: sharedWorkers, batch: sink == nil ? 64 : 8, configuration: configuration,
            sink: sink, publisher: publisher, log: log, metrics: metrics, logger: logger)
        return .shared(SharedStorage(store: store, workers: workers))
    }

    /// `count` workers over `queue` (each an owner of its own), applying to the accounts or
    /// delivering to `sink`; with `publisher`, one more that publishes unlink notices alone.
    static func makeWorkers(
        queue: any WorkQueue, tokenKey: [UInt8], count: Int, batch: Int, configuration: ReceiverConfiguration, sink: (any ActionSink)?,
        publisher: (any NoticePublisher)?, log: any EventLog, metrics: (any WorkMetrics)?, logger: Logger,
        deferWhile: (@Sendable () -> Bool)? = nil
    ) -> [QueueWorker] {
        // A webhook claim must outlive its deliveries: a batch of slow answers is not a dead receiver.
        let lease = sink == nil ? configuration.queueLease : max(configuration.queueLease, Double(batch) * (configuration.webhookTimeout + 5) + 30)
        var workers = (0..<count).map { _ in
            var settings = QueueWorker.Settings()
            settings.batch = batch
            settings.lease = lease
            settings.scope = publisher == nil ? .all : .sets
            settings.deferWhile = deferWhile
            return QueueWorker(
                queue: queue, settings: settings, table: configuration.actionTable, retry: configuration.retry, sink: sink, log: log,
                metrics: metrics, logger: logger)
        }
        if let publisher {
            // Notices a few per claim, the lease outliving their calls.
            var settings = QueueWorker.Settings()
            settings.batch = 4
            settings.lease = max(configuration.queueLease, 4 * (configuration.noticePublisher.timeout + 5) + 30)
            settings.scope = .notices
            workers.append(QueueWorker(
                queue: queue, settings: settings, retry: configuration.retry, notices: NoticeSending(publisher: publisher, tokenKey: tokenKey),
                log: log, metrics: metrics, logger: logger))
        }
        return workers
    }

    /// The webhook sink, when `webhook.url` is set.
    static func makeSink(configuration: ReceiverConfiguration) throws -> (any ActionSink)? {
        guard let url = configuration.webhookURL, let secretFile = configuration.webhookSecretFile else { return nil }
        let secret = try Receiver.readSecret(secretFile, setting: "webhook.secret_file")
        return try WebhookSink(url: url, secret: secret, timeout: configuration.webhookTimeout)
    }

    /// The unlink-notice keys, when `linking.notices.issuer` is set: read now, so a missing or
    /// unusable directory stops the start.
    /// A directory that breaks later keeps its last good keys, logged once when it breaks and
    /// once when it loads again (and shown by `/readyz` and `risc_notice_keys_ok`).
    static func noticeKeys(configuration: ReceiverConfiguration, logger: Logger? = nil) throws -> TransmitterKeyCache? {
        guard configuration.noticeIssuer != nil, let directory = configuration.noticeKeyDirectory else { return nil }
        do {
            return try TransmitterKeyCache(directory: directory) { problem in
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
    public var backendName: String {
        switch self {
        case .embedded: "embedded"
        case .shared: "postgresql"
        }
    }

    public var events: any EventStore {
        switch self {
        case .embedded(let embedded): embedded.store
        case .shared(let shared): shared.store.events
        }
    }

    public var health: any StoreHealth {
        switch self {
        case .embedded(let embedded): embedded.store
        case .shared(let shared): shared.store.events
        }
    }

    public var accounts: any AccountRepository {
        switch self {
        case .embedded(let embedded): EmbeddedAccountRepository(store: embedded.accounts)
        case .shared(let shared): shared.store.accounts
        }
    }

    /// The token-fingerprint key the store matches tokens with.
    var tokenKey: [UInt8] {
        switch self {
        case .embedded(let embedded): embedded.accounts.tokenKey
        case .shared(let shared): shared.store.tokenKey
        }
    }

    /// The embedded SQLite store, when that is the backend (tests and benchmarks read it directly).
    public var embeddedStore: SQLiteEventStore? {
        if case .embedded(let embedded) = self { return embedded.store }
        return nil
    }

    /// The queue's administration (`risc queue`, replay).
    public func admin() throws -> any QueueAdministration {
        switch self {
        case .embedded(let embedded): try embedded.owner.admin()
        case .shared(let shared): shared.store.admin
        }
    }

    /// Closes the store (without workers to stop: a command that drove them itself).
    public func close() {
        switch self {
        case .embedded(let embedded): embedded.owner.close()
        case .shared(let shared): shared.store.close()
        }
    }

    func retention() throws -> any RetentionStore {
        switch self {
        case .embedded(let embedded): try embedded.owner.retention()
        case .shared(let shared): shared.store.events
        }
    }

    /// The shared store: migrate, check durability and the token key, waiting for a server that
    /// cannot be reached yet (every 2 s, logged) but giving up at once on a refusal.
    public func prepare(logger: Logger) async throws {
        guard case .shared(let shared) = self else { return }
        var attempt = 0
        while true {
            do {
                try await shared.store.prepare()
                return
            } catch where !StoreError.isRefusal(error) && !Task.isCancelled {
                attempt += 1
                logger.warning(
                    "PostgreSQL store not reachable yet; retrying in 2 s",
                    metadata: ["risc.store": "\(shared.store.database.url)", "risc.error": "\(error)", "risc.attempt": "\(attempt)"])
                try await Task.sleep(for: .seconds(2))
            }
        }
    }

    /// The workers on the queue.
    public var workers: [QueueWorker] {
        switch self {
        case .embedded(let embedded): embedded.workers
        case .shared(let shared): shared.workers
        }
    }

    func start() {
        switch self {
        case .embedded(let embedded): for worker in embedded.workers { worker.start() }
        case .shared(let shared): shared.start()
        }
    }

    func stop() async {
        switch self {
        case .embedded(let embedded):
            await Self.stop(embedded.workers)
            embedded.owner.close()
        case .shared(let shared): await shared.stop()
        }
    }

    /// The storage as a service of the receiver's group: its workers start with the group and, on
    /// shutdown, finish the batch in hand before the store closes (the group stops it after
    /// everything started after it, the listeners included).
    struct StorageService: Service {
        let storage: ReceiverStorage

        func run() async throws {
            storage.start()
            try? await gracefulShutdown()
            await storage.stop()
        }
    }

    /// Each finishes the batch in hand (a notice's call may take linking.notices.timeout), together.
    static func stop(_ workers: [QueueWorker]) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in workers { group.addTask { await worker.stop() } }
        }
    }
}

extension ReceiverStorage {
    /// What is wrong with `store.url` (and a password file beside it), for the configuration's problems.
    static func storeURLProblems(_ text: String, passwordFile: String?) -> [String] {
        do {
            let url = try PostgresStoreURL(text)
            return passwordFile != nil ? url.passwordProblem.map { [$0] } ?? [] : []
        } catch { return ["store.url: \(error.description)"] }
    }

    /// `store.url` as an operator may see it: no password, query values redacted.
    public static func describe(storeURL text: String) -> String {
        (try? PostgresStoreURL(text))?.description ?? Redaction.url(text)
    }
}

/// A command's view of the store a configuration names, whichever the backend, through the ports
/// (`risc accounts`, `queue`, `stream verify`, `replay --from-store`, the drills): opened by the
/// same factory as the receiver's, with nothing started. The embedded store's parts are opened
/// when first asked for, so a command that lists the queue never needs the token key.
public final class StoreAccess: Sendable {
    public let configuration: ReceiverConfiguration
    private let shared: SharedStore?
    private let embedded: SQLiteStore

    private init(configuration: ReceiverConfiguration, shared: SharedStore?) {
        self.configuration = configuration
        self.shared = shared
        embedded = SQLiteStore(
            directory: configuration.dataDirectory, tokenKeyFile: configuration.tokenKeyFile,
            logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
    }

    /// Opens the store; a shared one is migrated and checked, within 15 s. `needsTokenKey`: the
    /// command reads or writes accounts. A refusal (`StoreError` `refused`) is thrown as it is.
    public static func open(configuration: ReceiverConfiguration, needsTokenKey: Bool, logger: Logger) async throws -> StoreAccess {
        guard let url = configuration.storeURL else { return StoreAccess(configuration: configuration, shared: nil) }
        var settings = SharedStore.Settings(
            url: url, passwordFile: configuration.storePasswordFile, caFile: configuration.storeCAFile, tokenKeyFile: configuration.tokenKeyFile)
        settings.acceptUnsafeDurability = configuration.storeAcceptUnsafeDurability
        settings.needsTokenKey = needsTokenKey
        let shared = try SharedStore(settings: settings, logger: logger)
        do {
            // Unstructured: a pool waiting for an unreachable server does not heed cancellation.
            try await withDeadline(15, "opening the store") { try await shared.prepare() }
        } catch {
            shared.close()
            throw error
        }
        return StoreAccess(configuration: configuration, shared: shared)
    }

    /// `embedded` or `postgresql`.
    public var backendName: String { shared == nil ? "embedded" : "postgresql" }
    var dataDirectory: String { configuration.dataDirectory }

    public func admin() throws -> any QueueAdministration {
        if let shared { return shared.admin }
        return try embedded.admin()
    }

    public func accounts() throws -> any AccountRepository { try accountsAndNotices().accounts }

    /// The accounts, and what queues unlink notices when the configuration turns them on
    /// (`linking.notices.issuer`): revoking or unlinking from the CLI tells Google as the admin API does.
    public func accountsAndNotices() throws -> (accounts: any AccountRepository, notices: UnlinkNotices?) {
        if let shared { return (shared.accounts, configuration.unlinkNotices(tokenKey: shared.tokenKey)) }
        let store = try embedded.accountStore()
        return (EmbeddedAccountRepository(store: store), configuration.unlinkNotices(tokenKey: store.tokenKey))
    }

    public func verifications() throws -> any VerificationRequests {
        if let shared { return shared.verifications }
        return try embedded.verifications()
    }

    public func close() {
        shared?.close()
        embedded.close()
    }
}
