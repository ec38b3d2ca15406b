import Hummingbird

/// Answers 405 with `Allow` (RFC 9110 §15.5.6) for a request to a path a route serves with other
/// methods; Hummingbird's router answers 404, as if the path did not exist. The table comes from
/// the router's own routes once they are all added, so it cannot drift from them.
struct MethodNotAllowed: RouterMiddleware {
    typealias Context = RISCRequestContext

    /// Each path as segments (`{name}` matches any one segment), with the methods it has (HEAD
    /// wherever GET is: the router answers it).
    let paths: [(segments: [Substring], allow: [String])]

    init(_ routes: [Router<Context>.RouteDescription]) {
        var methods: [String: Set<String>] = [:]
        for route in routes { methods["\(route.path)", default: []].insert(route.method.rawValue) }
        paths = methods.map { path, methods in
            (path.split(separator: "/"), (methods.contains("GET") ? methods.union(["HEAD"]) : methods).sorted())
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/")
            guard let path = paths.first(where: { Self.matches($0.segments, segments) }), !path.allow.contains(request.method.rawValue) else { throw error }
            return Response(status: .methodNotAllowed, headers: [.allow: path.allow.joined(separator: ", ")])
        }
    }

    static func matches(_ pattern: [Substring], _ segments: [Substring]) -> Bool {
        pattern.count == segments.count && zip(pattern, segments).allSatisfy { $0.hasPrefix("{") && $0.hasSuffix("}") || $0 == $1 }
    }
}
