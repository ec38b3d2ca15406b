import Hummingbird
import NIOCore

enum Responses {
    static func json(_ text: String, status: HTTPResponse.Status, extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func text(_ text: String, status: HTTPResponse.Status = .ok, contentType: String) -> Response {
        Response(status: status, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}
