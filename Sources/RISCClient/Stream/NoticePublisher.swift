import Foundation
public import RISCCore

/// Publishes unlink notices to Google's RISC API over libcurl (`../shared/docs/linking.md` §3):
/// signs each notice's claims with the transmitter's active key (`typ: secevent+jwt`, `kid`) at
/// the moment of sending and POSTs it with a service-account bearer token, the same key file and
/// token `risc stream` uses.
///
/// Google confirms the endpoint and `application/json`, not the body's shape: by default the
/// body is `{"set": "<compact SET>"}` (`linking.notices.json_field` renames the member);
/// `linking.notices.body = secevent+jwt` sends the bare SET as `application/secevent+jwt`, as the
/// older `events:report` API took it. Any 2xx is done; anything else, a transport error or a
/// timeout fails the attempt, and the queue retries it with backoff, then dead-letters it.
public struct GoogleNoticePublisher: NoticePublisher {
    public static let defaultEndpoint = "https://risc.googleapis.com/v1/events:publish"

    public enum Body: String, Sendable, CaseIterable {
        case json
        case secevent = "secevent+jwt"
    }

    public struct Settings: Sendable {
        public var endpoint = GoogleNoticePublisher.defaultEndpoint
        public var body = Body.json
        public var jsonField = "set"
        public var timeout: Double = 10
        public init() {}
    }

    public let settings: Settings
    let keys: TransmitterKeyCache
    /// nil: no bearer token (a test's fake, or a gateway that adds its own).
    let account: ServiceAccount?
    let client: CurlHTTPClient

    public init(settings: Settings, keys: TransmitterKeyCache, account: ServiceAccount?, client: CurlHTTPClient = CurlHTTPClient()) throws {
        if let refusal = client.policy.refusal(for: settings.endpoint) {
            throw FetchError(url: settings.endpoint, "unlink notice endpoint refused: \(refusal)")
        }
        self.settings = settings
        self.keys = keys
        self.account = account
        self.client = client
    }

    /// The notice signed as it goes out.
    public func sign(payload: [UInt8]) throws -> String {
        try keys.current().signer.sign(payload: payload, header: ["typ": "secevent+jwt"])
    }

    public func publish(payload: [UInt8], tokenID: String) throws -> String {
        let set = try sign(payload: payload)
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let account { headers.append(("Authorization", "Bearer " + (try account.bearerToken()))) }
        let body: [UInt8]
        switch settings.body {
        case .json:
            headers.append(("Content-Type", "application/json"))
            body = Array(JSONValue.object([settings.jsonField: .string(set)]).serialized.utf8)
        case .secevent:
            headers.append(("Content-Type", "application/secevent+jwt"))
            body = Array(set.utf8)
        }
        let response = try client.performBlocking(
            HTTPRequest(
                method: "POST", url: settings.endpoint, headers: headers, body: body, timeout: settings.timeout,
                connectTimeout: min(5, settings.timeout), maxResponseBytes: 64 * 1024))
        guard (200..<300).contains(response.status) else {
            throw FetchError(
                url: settings.endpoint,
                "Google answered HTTP \(response.status): \(Printable.safe(RISCManagementClient.errorMessage(response.body), maxBytes: 200))")
        }
        return "published (HTTP \(response.status))"
    }
}
