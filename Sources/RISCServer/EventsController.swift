import Foundation
import Hummingbird
import Logging
import NIOCore
import RISCCore

/// The RFC 8935 push endpoint: `POST` the compact SET, get 202 once it is on disk.
struct EventsController: Sendable {
    let intake: Intake
    let maxBodyBytes: Int
    let retryAfter: Int
    let log: any EventLog
    /// Peers whose `X-Forwarded-For` is believed (reverse proxies).
    var trustedProxies: Set<String> = []
    var limiter: InvalidRequestLimiter?

    func register(on router: Router<RISCRequestContext>, path: String) {
        router.post(RouterPath(path)) { request, context in try await receive(request, context) }
        for method in [HTTPRequest.Method.get, .put, .delete, .patch, .head, .options] {
            router.on(RouterPath(path), method: method) { _, _ in
                Response(status: .methodNotAllowed, headers: [.allow: "POST"])
            }
        }
    }

    /// The client's address: the peer's, or, when the peer is a trusted proxy, the last address in
    /// its `X-Forwarded-For` (the one the proxy itself saw).
    func clientAddress(_ request: Request, _ context: RISCRequestContext) -> String? {
        let peer = context.remoteHost
        guard let peer, !trustedProxies.isEmpty, trustedProxies.contains(peer.trimmingCharacters(in: ["[", "]"])),
            let forwarded = request.headers[.init("X-Forwarded-For")!],
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty
        else { return peer }
        return String(last.prefix(64))
    }

    func receive(_ request: Request, _ context: RISCRequestContext) async throws -> Response {
        let remote = clientAddress(request, context)
        if let limiter, let remote, let limited = limiter.check(remote, now: Date().timeIntervalSince1970) {
            if let count = limited.log {
                var record = EventLogRecord(step: "received", outcome: "limited", time: Date().timeIntervalSince1970)
                record["remote"] = .string(remote)
                record["http_status"] = 429
                record["count"] = .number(Double(count))
                log.record(record)
            }
            intake.metrics?.observe(outcome: "limited", err: nil, verifySeconds: nil, commitSeconds: nil)
            return Response(status: .tooManyRequests, headers: [.retryAfter: String(max(1, limited.retryAfter))])
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maxBodyBytes)
        } catch is NIOTooManyBytesError {
            var record = EventLogRecord(step: "received", outcome: "rejected", time: Date().timeIntervalSince1970)
            record["http_status"] = 413
            record["description"] = .string("body larger than \(maxBodyBytes) bytes")
            if let remote { record["remote"] = .string(remote) }
            log.record(record)
            intake.metrics?.observe(outcome: "too_large", err: nil, verifySeconds: nil, commitSeconds: nil)
            if let limiter, let remote { limiter.recordInvalid(remote, now: Date().timeIntervalSince1970) }
            return Response(status: .contentTooLarge)
        }
        let delivery = Intake.Delivery(body: Array(buffer: body), remoteAddress: remote, contentType: request.headers[.contentType])
        do {
            _ = try await intake.receive(delivery)
            return Response(status: .accepted)
        } catch let error as SETError {
            context.logger.debug("SET rejected", metadata: ["risc.err": "\(error.code)"])
            if let limiter, let remote { limiter.recordInvalid(remote, now: Date().timeIntervalSince1970) }
            return Responses.rejection(error)
        } catch let error as KeyUnavailableError {
            context.logger.warning("no usable key set; answering 503", metadata: ["risc.error": "\(error)"])
            return Responses.unavailable(retryAfter: retryAfter, reason: "signing keys are temporarily unavailable")
        } catch {
            context.logger.error("cannot store the SET; answering 503", metadata: ["risc.error": "\(error)"])
            return Responses.unavailable(retryAfter: retryAfter, reason: "the receiver cannot store events right now")
        }
    }
}
