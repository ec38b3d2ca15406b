import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// Whether the batch statement's own transaction committed, read off the connection's protocol
/// messages, so that a batch is answered without a query sent after it to confirm its COMMIT.
///
/// The one-statement path (`StoreBatch`) runs in the implicit transaction that PostgreSQL commits
/// at the protocol's Sync; its rows come back before that COMMIT, and the ReadyForQuery that ends
/// the exchange comes after it (with `synchronous_commit` on: once the WAL is on disk). PostgresNIO
/// ends a query's rows at CommandComplete and shows no ReadyForQuery, so risc used to confirm each
/// batch with a `SELECT 1`, a second round trip a batch. This watch sits in the connection's
/// channel beside PostgresNIO's handler (after TLS) and only reads: it numbers each Sync written
/// after a Bind of the batch statement, and matches each ReadyForQuery read with its Sync (the
/// server answers every Sync, and every simple or function-call query, with exactly one, in
/// order). The batch committed when its ReadyForQuery says idle (`I`) and no ErrorResponse came
/// since the one before (an error at COMMIT, a deferred constraint, comes between).
///
/// Anything the watch cannot vouch for gives `unknown`, and the store confirms that batch with a
/// `SELECT 1` as before: a connection PostgresNIO does not let it join, bytes that do not parse
/// as the protocol's messages (it then stops reading for good), a watch removed.
final class CommitWatch: Sendable {
    enum Outcome: Sendable, Equatable {
        /// Its ReadyForQuery came, idle, with no error since the one before: committed.
        case committed
        /// An error came first, or the transaction was not idle at the end, or the connection
        /// closed before its ReadyForQuery: not known to be committed (the SETs are answered 503
        /// and sent again; a duplicate is answered 202).
        case failed
        /// The watch cannot tell: confirm another way.
        case unknown
    }

    private struct State {
        /// Batch statements written so far on the connection (numbered from 1).
        var written = 0
        /// The last outcome read, by number, while nobody asked for it yet.
        var outcome: (number: Int, outcome: Outcome)?
        var waiting: [Int: EventLoopPromise<Outcome>] = [:]
        /// Set once the watch can tell nothing more: every question from then on gets it.
        var ended: Outcome?
    }

    private let state = Mutex(State())
    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// The outcome of the batch statement written last on the connection: the caller's, whose
    /// rows came back (it holds the connection, so no other batch statement is written meanwhile).
    func lastBatch() -> EventLoopFuture<Outcome> {
        state.withLock { state -> EventLoopFuture<Outcome> in
            let number = state.written
            if let (last, outcome) = state.outcome, last == number {
                state.outcome = nil
                return eventLoop.makeSucceededFuture(outcome)
            }
            if let ended = state.ended { return eventLoop.makeSucceededFuture(ended) }
            guard number > 0 else { return eventLoop.makeSucceededFuture(.unknown) }
            let promise = eventLoop.makePromise(of: Outcome.self)
            state.waiting[number] = promise
            return promise.futureResult
        }
    }

    /// The handler wrote batch statement number `number`.
    fileprivate func wrote(_ number: Int) { state.withLock { $0.written = number } }

    /// Batch statements' outcomes, as their ReadyForQuery messages came.
    fileprivate func ended(_ outcomes: [(number: Int, outcome: Outcome)]) {
        let answers = state.withLock { state -> [(EventLoopPromise<Outcome>, Outcome)] in
            var answers: [(EventLoopPromise<Outcome>, Outcome)] = []
            for (number, outcome) in outcomes {
                if let promise = state.waiting.removeValue(forKey: number) {
                    answers.append((promise, outcome))
                } else {
                    // Kept for a question to come; an older one nobody asked for (a batch stored
                    // in a transaction of its own, or one that failed) is dropped.
                    state.outcome = (number, outcome)
                }
            }
            return answers
        }
        for (promise, outcome) in answers { promise.succeed(outcome) }
    }

    /// The watch tells nothing from now on: `outcome` to every question asked or to come.
    fileprivate func end(_ outcome: Outcome) {
        let waiting = state.withLock { state -> [EventLoopPromise<Outcome>] in
            if state.ended == nil { state.ended = outcome }
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for promise in waiting { promise.succeed(outcome) }
    }

    /// Joins `connection`'s channel, behind its TLS handler if it has one; nil when PostgresNIO
    /// does not show the channel (the store then confirms every batch with a query).
    static func install(on connection: PostgresConnection) async -> CommitWatch? {
        guard let channel = Mirror(reflecting: connection).children.first(where: { $0.label == "channel" })?.value as? any Channel else {
            return nil
        }
        let watch = CommitWatch(eventLoop: channel.eventLoop)
        let installed = channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            let handler = CommitWatchHandler(watch: watch)
            if let tls = try? pipeline.handler(type: NIOSSLClientHandler.self) {
                try pipeline.addHandler(handler, position: .after(tls))
            } else {
                try pipeline.addHandler(handler, position: .first)
            }
        }
        do { try await installed.get() } catch { return nil }
        return watch
    }
}

/// The protocol's messages in the bytes one way, for `CommitWatch`: what was written and read,
/// as far as the watch needs it. Kept apart from the channel so tests feed it bytes.
struct ProtocolMessages {
    /// The statement whose executions are numbered.
    let statement: [UInt8]
    private var written = MessageFrames(types: Array("BCdcfDEHFPpQSX".utf8))
    private var read = MessageFrames(types: Array("RK23CdcGHWDIEVvnNAtS1sZT".utf8))
    /// Syncs (and simple queries) written and not yet answered, oldest first: the batch
    /// statement's number, or 0 for another query.
    private var unanswered: [Int] = []
    private var head = 0
    private var batchBound = false
    private var errorSinceReady = false
    /// The server's bytes are read from the first Sync written on: the connection was idle when
    /// the watch joined it, so what comes after that starts at a message.
    private var reading = false
    private(set) var numbered = 0
    /// Set when the bytes did not parse: nothing more is told.
    private(set) var lost = false

    init(statement: String) { self.statement = Array(statement.utf8) }

    /// Bytes written.
    mutating func wrote(_ buffer: ByteBuffer) {
        guard !lost else { return }
        let parsed = written.feed(buffer) { type, body in
            switch type {
            case UInt8(ascii: "B"):
                // Bind: the portal's name, then the statement's, each ending in a zero byte.
                guard let portalEnd = body.firstIndex(of: 0) else { return false }
                let name = body[(portalEnd + 1)...].prefix { $0 != 0 }
                batchBound = name.elementsEqual(statement) && body.count > portalEnd + 1 + statement.count
            case UInt8(ascii: "S"), UInt8(ascii: "Q"), UInt8(ascii: "F"):
                if batchBound {
                    numbered += 1
                    unanswered.append(numbered)
                } else {
                    unanswered.append(0)
                }
                batchBound = false
                reading = true
            default: break
            }
            return true
        }
        if !parsed { lost = true }
    }

    /// Bytes read: the batch statements whose exchange ended in them, with their outcomes.
    mutating func read(_ buffer: ByteBuffer) -> [(number: Int, outcome: CommitWatch.Outcome)] {
        guard !lost, reading else { return [] }
        var ended: [(number: Int, outcome: CommitWatch.Outcome)] = []
        let parsed = read.feed(buffer) { type, body in
            switch type {
            case UInt8(ascii: "E"): errorSinceReady = true
            case UInt8(ascii: "Z"):
                // ReadyForQuery: five bytes long, its status idle, in a transaction or failed.
                guard body.count == 1, let status = body.first, [UInt8(ascii: "I"), UInt8(ascii: "T"), UInt8(ascii: "E")].contains(status),
                    head < unanswered.count
                else { return false }
                let number = unanswered[head]
                head += 1
                if head > 64 {
                    unanswered.removeFirst(head)
                    head = 0
                }
                if number > 0 { ended.append((number, !errorSinceReady && status == UInt8(ascii: "I") ? .committed : .failed)) }
                errorSinceReady = false
            default: break
            }
            return true
        }
        if !parsed { lost = true }
        return ended
    }
}

/// Splits bytes into the protocol's messages (a type byte, a 4-byte length counting itself, the
/// body), across reads; hands on each type and the first `keep` bytes of its body.
struct MessageFrames {
    private enum Phase { case header, keeping, skipping }
    static let keep = 64
    /// Longer than any message PostgreSQL sends or takes (1 GB).
    static let longest = 1 << 30 + 1024
    let types: Set<UInt8>
    private var phase = Phase.header
    private var header: [UInt8] = []
    private var body: [UInt8] = []
    private var left = 0, skip = 0

    init(types: [UInt8]) { self.types = Set(types) }

    /// Feeds `buffer`; `message` gets each message's type and kept body, and returns false when
    /// it makes no sense there. False when the bytes are not messages (or `message` said so).
    mutating func feed(_ buffer: ByteBuffer, _ message: (UInt8, [UInt8]) -> Bool) -> Bool {
        let bytes = buffer.readableBytesView
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch phase {
            case .header:
                header.append(bytes[index])
                index += 1
                guard header.count == 5 else { continue }
                let length = header[1...].reduce(0) { $0 << 8 | Int($1) }
                guard types.contains(header[0]), length >= 4, length <= Self.longest else { return false }
                left = min(length - 4, Self.keep)
                skip = length - 4 - left
                body.removeAll(keepingCapacity: true)
                phase = .keeping
                if left == 0, !finish(message) { return false }
            case .keeping:
                let count = min(left, bytes.endIndex - index)
                body.append(contentsOf: bytes[index..<(index + count)])
                index += count
                left -= count
                if left == 0, !finish(message) { return false }
            case .skipping:
                let count = min(skip, bytes.endIndex - index)
                index += count
                skip -= count
                if skip == 0 { phase = .header }
            }
        }
        return true
    }

    private mutating func finish(_ message: (UInt8, [UInt8]) -> Bool) -> Bool {
        let type = header[0]
        header.removeAll(keepingCapacity: true)
        phase = skip > 0 ? .skipping : .header
        return message(type, body)
    }
}

/// `CommitWatch`'s place in the channel: reads both ways and passes everything on untouched.
/// Lives on the channel's event loop; only `watch` is shared.
final class CommitWatchHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var messages = ProtocolMessages(statement: StoreBatch.name)
    private let watch: CommitWatch

    init(watch: CommitWatch) { self.watch = watch }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ended = messages.read(unwrapInboundIn(data))
        if messages.lost { watch.end(.unknown) } else if !ended.isEmpty { watch.ended(ended) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let before = messages.numbered
        messages.wrote(unwrapOutboundIn(data))
        if messages.lost { watch.end(.unknown) } else if messages.numbered != before { watch.wrote(messages.numbered) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        watch.end(.failed)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { watch.end(.unknown) }
}
