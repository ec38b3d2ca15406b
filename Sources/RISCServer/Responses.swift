import Hummingbird
import NIOCore
import RISCCore

enum Responses {
    /// RFC 8935 §2.3: 400, `Content-Type: application/json`, `Content-Language`, `{"err", "description"}`.
    static func rejection(_ error: SETError) -> Response {
        json(error.responseBody, status: .badRequest, extra: [.contentLanguage: "en"])
    }

    /// Our own temporary fault: 503 with `Retry-After`, so the transmitter tries again.
    static func unavailable(retryAfter: Int, reason: String) -> Response {
        var body = JSONObject()
        body["error"] = "temporarily_unavailable"
        body["description"] = .string(reason)
        return json(JSONValue.object(body).serialized, status: .serviceUnavailable, extra: [.retryAfter: String(retryAfter)])
    }

    static func json(_ text: String, status: HTTPResponse.Status, extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func text(_ text: String, status: HTTPResponse.Status = .ok, contentType: String) -> Response {
        Response(status: status, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}
