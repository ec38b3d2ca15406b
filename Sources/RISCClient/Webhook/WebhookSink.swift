import Foundation
public import RISCCore

/// POSTs each SET's actions as JSON to the site's own revocation endpoint, for sites whose
/// sessions and tokens live in their own database.
///
/// Signed: `X-RISC-Timestamp: <unix seconds>` and `X-RISC-Signature: sha256=<hex>` where the hex is
/// HMAC-SHA-256 under the shared secret of `<timestamp> "." <body>`. `Idempotency-Key: <hex>` is
/// the same for every delivery of one SET (SHA-256 of issuer, NUL, `jti`): deliveries are at least
/// once (a retry after a timeout, or a receiver that died before recording the answer), so a site
/// that must not act twice keeps the keys it has handled. Any 2xx is done; anything
/// else, or a transport error or timeout, fails the attempt so the worker retries with backoff.
public struct WebhookSink: ActionSink {
    public let url: String
    let secret: [UInt8]
    let client: CurlHTTPClient
    let timeout: Double

    /// `caFile`: a PEM CA bundle that verifies the webhook's certificate instead of the system's CAs.
    public init(url: String, secret: [UInt8], timeout: Double = 10, caFile: String? = nil, client: CurlHTTPClient = CurlHTTPClient()) throws {
        if let refusal = client.policy.refusal(for: url) { throw FetchError(url: url, "webhook URL refused: \(refusal)") }
        guard secret.count >= 16 else { throw FetchError(url: url, "the webhook secret must be at least 16 bytes") }
        self.url = url
        self.secret = secret
        self.timeout = timeout
        var client = client
        if let caFile { client.caBundlePath = caFile }
        self.client = client
    }

    public func deliver(
        _ plan: ActionPlan, tokens: [TokenToRevoke], tokenID: String, issuer: String, idempotencyKey: String, appliedByRISC: Bool = false,
        now: Double
    ) throws -> [String] {
        let body = Array(plan.webhookBody(tokenID: tokenID, issuer: issuer, sentAt: now, tokens: tokens, appliedByRISC: appliedByRISC).serialized.utf8)
        let timestamp = String(Int(now))
        let signature = HMACSHA256.hex(key: secret, data: Array((timestamp + ".").utf8) + body)
        let response = try client.performBlocking(
            HTTPRequest(
                method: "POST", url: url,
                headers: [
                    ("Content-Type", "application/json"), ("X-RISC-Timestamp", timestamp), ("X-RISC-Signature", "sha256=" + signature),
                    ("Idempotency-Key", idempotencyKey),
                ],
                body: body, timeout: timeout, connectTimeout: min(5, timeout), maxResponseBytes: 64 * 1024))
        guard (200..<300).contains(response.status) else {
            throw FetchError(url: url, "webhook answered HTTP \(response.status)")
        }
        return plan.steps.map { _ in "delivered to webhook (HTTP \(response.status))" }
    }
}
