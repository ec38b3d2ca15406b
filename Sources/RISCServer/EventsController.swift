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

    func register(on router: Router<RISCRequestContext>, path: String) {
        router.post(RouterPath(path)) { request, context in try await receive(request, context) }
        for method in [HTTPRequest.Method.get, .put, .delete, .patch, .head, .options] {
            router.on(RouterPath(path), method: method) { _, _ in
                Response(status: .methodNotAllowed, headers: [.allow: "POST"])
            }
        }
    }

    func receive(_ request: Request, _ context: RISCRequestContext) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maxBodyBytes)
        } catch is NIOTooManyBytesError {
            var record = EventLogRecord(step: "received", outcome: "rejected", time: Date().timeIntervalSince1970)
            record["http_status"] = 413
            record["description"] = .string("body larger than \(maxBodyBytes) bytes")
            if let remote = context.remoteHost { record["remote"] = .string(remote) }
            log.record(record)
            intake.metrics?.observe(outcome: "too_large", err: nil, verifySeconds: nil, commitSeconds: nil)
            return Response(status: .contentTooLarge)
        }
        let delivery = Intake.Delivery(
            body: Array(buffer: body), remoteAddress: context.remoteHost, contentType: request.headers[.contentType])
        do {
            _ = try await intake.receive(delivery)
            return Response(status: .accepted)
        } catch let error as SETError {
            context.logger.debug("SET rejected", metadata: ["risc.err": "\(error.code)"])
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
