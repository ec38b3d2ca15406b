import Foundation
public import Logging
public import RISCClient
public import RISCCore
import ServiceLifecycle

/// RFC 8936 poll delivery for one SSF transmitter: fetches its SETs, puts each through the same
/// intake as a push (verified, stored durably, logged, applied), and acknowledges a SET only once
/// it is stored; a SET refused is reported in `setErrs` with its RFC 8935 code; one risc cannot
/// take right now (store or keys unavailable) is neither, so the transmitter delivers it again.
///
/// Exactly one receiver polls a stream when several share a store: each cycle first holds the
/// lease `ssf-poll:NAME` in the store, so another takes over within a lease period when the holder
/// dies. 429 and 503 are honoured (`Retry-After`, else a backoff doubling from 1 s to 60 s); more
/// waiting SETs are fetched at once, else the next poll waits `interval`. Time is injected.
public final class SSFPoller: Sendable {
    public struct Settings: Sendable {
        public var name: String
        public var url: String
        /// The push path its SETs are judged as arriving on (the transmitter's).
        public var path: String?
        public var interval: Double = 5
        public var lease: Double = 30
        public var maxEvents = 100
        public var owner: String
        public init(name: String, url: String, path: String?, owner: String) {
            self.name = name
            self.url = url
            self.path = path
            self.owner = owner
        }
    }

    public let settings: Settings
    let client: SSFStreamClient
    let intake: Intake
    let leases: any LeaseStore
    let logger: Logger
    let clock: @Sendable () -> Double
    let sleep: @Sendable (Double) async throws -> Void

    public init(
        settings: Settings, client: SSFStreamClient, intake: Intake, leases: any LeaseStore, logger: Logger,
        clock: @escaping @Sendable () -> Double = systemNow,
        sleep: @escaping @Sendable (Double) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }
    ) {
        self.settings = settings
        self.client = client
        self.intake = intake
        self.leases = leases
        self.logger = logger
        self.clock = clock
        self.sleep = sleep
    }

    var leaseName: String { "ssf-poll:\(settings.name)" }

    /// Polls until cancelled; what is stored but not yet acknowledged is acknowledged on the way out.
    public func run() async {
        var acks: [String] = [], errors = JSONObject()
        var backoff = 1.0
        while !Task.isCancelled {
            do {
                guard try await leases.hold(leaseName, owner: settings.owner, for: settings.lease, now: clock()) else {
                    try await sleep(min(settings.interval, settings.lease / 3))  // another receiver polls this stream
                    continue
                }
                let answered = Set(acks).union(errors.keys)
                let answer = try await client.poll(url: settings.url, ack: acks, errors: errors, maxEvents: settings.maxEvents)
                backoff = 1
                let unavailable: Bool
                (acks, errors, unavailable) = await take(answer.sets)
                if unavailable {
                    try await sleep(backoff)  // ours: not acknowledged, delivered again later
                    backoff = min(backoff * 2, 60)
                } else if !answer.sets.contains(where: { !answered.contains($0.jti) }) {
                    // A poll that brought nothing new waits, whatever its `moreAvailable` says (with
                    // no SETs, or only those this very poll acknowledged or refused, asking again at
                    // once would go on for ever); one that brought SETs polls again at once, to
                    // acknowledge them and take what else waits.
                    try await sleep(settings.interval)
                }
            } catch let error as SSFError {
                let wait = error.retryAfter ?? backoff
                backoff = min(backoff * 2, 60)
                logger.warning("SSF poll failed; trying again", metadata: ["risc.transmitter": "\(settings.name)", "risc.error": "\(error)", "risc.wait_s": "\(wait)"])
                try? await sleep(wait)
            } catch {
                if Task.isCancelled { break }
                logger.warning("SSF poll failed; trying again", metadata: ["risc.transmitter": "\(settings.name)", "risc.error": "\(error)"])
                try? await sleep(backoff)
                backoff = min(backoff * 2, 60)
            }
        }
        // Outside the cancelled task (a cancelled query would not run): what is stored is
        // acknowledged, and the lease given up so another receiver takes over at once.
        let (client, leases, settings, name) = (client, leases, settings, leaseName)
        await Task {
            if !acks.isEmpty || !errors.isEmpty { _ = try? await client.poll(url: settings.url, ack: acks, errors: errors, maxEvents: 0) }
            try? await leases.release(name, owner: settings.owner)
        }.value
    }

    /// Each SET through the intake: stored ones to acknowledge, refused ones with their error,
    /// and whether one could not be taken now (the rest of the batch waits for the next poll).
    func take(_ sets: [(jti: String, set: JSONValue)]) async -> (acks: [String], errors: JSONObject, unavailable: Bool) {
        var acks: [String] = [], errors = JSONObject()
        for (jti, set) in sets {
            let delivery = Intake.Delivery(
                body: Array((set.stringValue ?? "").utf8), remoteAddress: "poll:\(settings.name)", contentType: nil, path: settings.path, polledAs: jti)
            do {
                guard set.stringValue != nil else {
                    // Neither acknowledged nor refused, it would come back in every poll unseen.
                    let error = SETError(.invalidRequest, "the poll answer's value under this jti is no string, so no compact SET (RFC 8936 §2.2)")
                    intake.refuse(delivery, error)
                    throw error
                }
                _ = try await intake.receive(delivery)
                acks.append(jti)
            } catch let error as SETError {
                errors[jti] = .object(["err": .string(error.code.rawValue), "description": .string(error.description)])
            } catch {
                return (acks, errors, true)
            }
        }
        return (acks, errors, false)
    }
}

/// The poller as a service of the receiver's group: stopped (its acknowledgements sent) on shutdown.
struct SSFPollerService: Service {
    let poller: SSFPoller
    func run() async throws {
        await cancelWhenGracefulShutdown { await poller.run() }
    }
}
