import Foundation
public import RISCCore

/// Google's RISC management API (v1beta, spec §1.10) over libcurl: read and replace the stream
/// configuration, read and change its status, and ask for a verification event.
///
/// Every call carries a freshly signed service-account bearer token; bodies are JSON both ways.
public struct RISCManagementClient: Sendable {
    public static let defaultBase = "https://risc.googleapis.com"
    public static let pushDeliveryMethod = "https://schemas.openid.net/secevent/risc/delivery-method/push"

    public let account: ServiceAccount
    public let base: String
    public var http: CurlHTTPClient
    public var clock: @Sendable () -> Double

    public init(account: ServiceAccount, base: String = Self.defaultBase, http: CurlHTTPClient = CurlHTTPClient()) {
        self.account = account
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        self.http = http
        clock = systemNow
    }

    /// `GET /v1beta/stream`: the current configuration.
    public func stream() async throws -> JSONObject { try await call("GET", "/v1beta/stream") }

    /// `POST /v1beta/stream:update`: creates or replaces the configuration.
    @discardableResult
    public func updateStream(url: String, events: [EventType]) async throws -> JSONObject {
        var delivery = JSONObject()
        delivery["delivery_method"] = .string(Self.pushDeliveryMethod)
        delivery["url"] = .string(url)
        var body = JSONObject()
        body["delivery"] = .object(delivery)
        body["events_requested"] = .array(events.map { .string($0.uri) })
        return try await call("POST", "/v1beta/stream:update", body: body)
    }

    /// `GET /v1beta/stream/status`.
    public func status() async throws -> JSONObject { try await call("GET", "/v1beta/stream/status") }

    /// `POST /v1beta/stream/status:update` with `enabled` or `disabled`.
    @discardableResult
    public func setStatus(enabled: Bool) async throws -> JSONObject {
        try await call("POST", "/v1beta/stream/status:update", body: ["status": .string(enabled ? "enabled" : "disabled")])
    }

    /// `POST /v1beta/stream:verify`: Google then pushes a verification SET carrying `state`.
    @discardableResult
    public func verify(state: String) async throws -> JSONObject {
        try await call("POST", "/v1beta/stream:verify", body: ["state": .string(state)])
    }

    func call(_ method: String, _ path: String, body: JSONObject? = nil) async throws -> JSONObject {
        let token = try account.bearerToken(now: clock())
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer " + token), ("Accept", "application/json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let response: HTTPResponse
        do {
            response = try await http.perform(
                HTTPRequest(
                    method: method, url: base + path, headers: headers, body: body.map { Array(JSONValue.object($0).serialized.utf8) },
                    timeout: 30))
        } catch {
            throw RISCAPIError(status: nil, message: error.description)
        }
        guard (200..<300).contains(response.status) else {
            throw RISCAPIError(status: response.status, message: Self.errorMessage(response.body))
        }
        if response.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return JSONObject() }
        do { return try JSONParser.parseObject(response.body) } catch {
            throw RISCAPIError(status: response.status, message: "the answer is not a JSON object")
        }
    }

    /// Google's JSON error body is `{"error": {"code", "message", "status"}}`; fall back to the text.
    static func errorMessage(_ body: [UInt8]) -> String {
        if let object = try? JSONParser.parseObject(body) {
            if let message = object["error"]?.objectValue?["message"]?.stringValue { return message }
            if let message = object["error"]?.stringValue { return message }
            if let message = object["message"]?.stringValue { return message }
        }
        let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "(no message)" : text
    }
}
