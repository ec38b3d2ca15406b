import CRiscCurl
public import RISCCore

/// HTTP over libcurl, for the issuer's discovery document and JWKS and, later, the RISC API
/// and webhook sinks.
///
/// - TLS 1.2 or newer, with certificate and host checks on (libcurl's defaults, never turned off).
/// - Only URLs `URLPolicy` allows; redirects are followed by hand, at most three, and only to
///   the same host and an allowed scheme.
/// - Timeouts and a response-size cap on every request.
/// - The blocking `curl_easy_perform` runs on `BlockingPool`'s own threads, never on Swift's
///   cooperative pool.
public struct CurlHTTPClient: Sendable {
    /// Seconds as libcurl's integer milliseconds: anything past about 24 days (infinity and NaN
    /// too) is that longest wait, never a trap converting it.
    static func milliseconds(_ seconds: Double) -> Int {
        let milliseconds = seconds * 1000
        return milliseconds < Double(Int32.max) ? Int(max(0, milliseconds)) : Int(Int32.max)
    }

    public var policy: URLPolicy
    public var userAgent: String
    /// A CA bundle to trust instead of the system's (for tests with their own CA).
    public var caBundlePath: String?
    /// A client certificate and its key (PEM files), for servers that ask for one (mutual TLS).
    public var clientCertificate: (certificate: String, key: String)?
    /// The threads `perform` blocks on: `BlockingPool.shared`, or the receiver's own (`BlockingPool.receiver`).
    public var pool: BlockingPool

    private static let initialised: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// The time limit of a request that names none, seconds. risc's own calls (key fetches,
    /// deliveries, notices) each name theirs from the configuration; tests' clients wait longer,
    /// since a receiver in a test process shares two cores with every other test.
    public var defaultTimeout: Double
    /// The connection (and TLS handshake) time limit of a request that names none, seconds.
    public var defaultConnectTimeout: Double

    public init(
        policy: URLPolicy = URLPolicy(), userAgent: String = "risc/0.1", caBundlePath: String? = nil, pool: BlockingPool = .shared,
        defaultTimeout: Double = 10, defaultConnectTimeout: Double = 5
    ) {
        self.defaultTimeout = defaultTimeout
        self.defaultConnectTimeout = defaultConnectTimeout
        self.policy = policy
        self.pool = pool
        self.userAgent = userAgent
        self.caBundlePath = caBundlePath
    }

    /// Performs `request` off the cooperative pool.
    public func perform(_ request: HTTPRequest) async throws(FetchError) -> HTTPResponse {
        let result: Result<HTTPResponse, FetchError> = await pool.run {
            Result { () throws(FetchError) in try self.performBlocking(request) }
        }
        return try result.get()
    }

    /// Performs `request` on the calling thread, following same-host redirects.
    public func performBlocking(_ request: HTTPRequest) throws(FetchError) -> HTTPResponse {
        guard Self.initialised else { throw FetchError(url: request.url, "libcurl failed to initialise") }
        var current = request
        for _ in 0...3 {
            if let refusal = policy.refusal(for: current.url) { throw FetchError(url: current.url, refusal) }
            let (response, location) = try performOnce(current)
            guard (300..<400).contains(response.status), let location else { return response }
            guard let from = URLPolicy.components(current.url), let to = URLPolicy.components(location),
                from.host == to.host
            else { throw FetchError(url: request.url, "redirect to another host refused") }
            current.url = location
            if response.status == 303 {
                current.method = "GET"
                current.body = nil
            }
        }
        throw FetchError(url: request.url, "too many redirects")
    }

    private func performOnce(_ request: HTTPRequest) throws(FetchError) -> (HTTPResponse, String?) {
        guard let curl = curl_easy_init() else { throw FetchError(url: request.url, "curl_easy_init failed") }
        defer { curl_easy_cleanup(curl) }
        // libcurl keeps these pointers until the transfer ends, so they live on the heap, not in
        // Swift inout temporaries.
        let body = UnsafeMutablePointer<risc_curl_buffer>.allocate(capacity: 1)
        let headerLines = UnsafeMutablePointer<risc_curl_buffer>.allocate(capacity: 1)
        body.initialize(to: risc_curl_buffer(data: nil, length: 0, capacity: 0, cap: request.maxResponseBytes, overflow: 0))
        headerLines.initialize(to: risc_curl_buffer(data: nil, length: 0, capacity: 0, cap: 64 * 1024, overflow: 0))
        defer {
            risc_curl_buffer_free(body)
            risc_curl_buffer_free(headerLines)
            body.deallocate()
            headerLines.deallocate()
        }
        // libcurl's own account of a failure ("Failed to connect to 127.0.0.1 port 1 after 0 ms: …"),
        // more than the error code's text alone.
        let detail = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        detail.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { detail.deallocate() }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(list) }
        for (name, value) in request.headers { list = curl_slist_append(list, "\(name): \(value)") }
        if request.body != nil, !request.headers.contains(where: { $0.name.lowercased() == "expect" }) {
            list = curl_slist_append(list, "Expect:")
        }

        let scheme = URLPolicy.components(request.url)?.scheme ?? "https"
        var rc = risc_curl_set_string(curl, CURLOPT_URL, request.url)
        func apply(_ code: CURLcode) { if rc == CURLE_OK { rc = code } }
        apply(risc_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, scheme))
        apply(risc_curl_set_long(curl, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2)))
        if scheme == "https" { apply(risc_curl_set_string(curl, CURLOPT_SSL_CIPHER_LIST, TLSPolicy.tls12CipherSuites)) }
        apply(risc_curl_set_long(curl, CURLOPT_NOSIGNAL, 1))
        apply(risc_curl_set_string(curl, CURLOPT_ERRORBUFFER, detail))
        apply(risc_curl_set_long(curl, CURLOPT_FOLLOWLOCATION, 0))
        apply(risc_curl_set_long(curl, CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout ?? defaultTimeout)))
        apply(risc_curl_set_long(curl, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(request.connectTimeout ?? defaultConnectTimeout)))
        apply(risc_curl_set_string(curl, CURLOPT_USERAGENT, userAgent))
        apply(risc_curl_set_string(curl, CURLOPT_ACCEPT_ENCODING, ""))
        if let caBundlePath { apply(risc_curl_set_string(curl, CURLOPT_CAINFO, caBundlePath)) }
        if let clientCertificate {
            apply(risc_curl_set_string(curl, CURLOPT_SSLCERT, clientCertificate.certificate))
            apply(risc_curl_set_string(curl, CURLOPT_SSLKEY, clientCertificate.key))
        }
        apply(risc_curl_set_headers(curl, list))
        apply(risc_curl_capture(curl, body, headerLines))
        if let payload = request.body {
            apply(
                payload.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { risc_curl_set_body(curl, $0.baseAddress, $0.count) }
                })
        }
        if request.method != "GET" && !(request.method == "POST" && request.body != nil) {
            apply(risc_curl_set_string(curl, CURLOPT_CUSTOMREQUEST, request.method))
        }
        guard rc == CURLE_OK else { throw FetchError(url: request.url, "curl option: \(Self.message(rc))") }

        let result = curl_easy_perform(curl)
        if body.pointee.overflow != 0 {
            throw FetchError(url: request.url, "response larger than \(request.maxResponseBytes) bytes")
        }
        guard result == CURLE_OK else { throw FetchError(url: request.url, Self.message(result, detail: detail)) }

        let status = risc_curl_response_code(curl)
        let location = risc_curl_redirect_url(curl).map { String(cString: $0) }
        let bytes = body.pointee.data.map { Array(UnsafeRawBufferPointer(start: $0, count: body.pointee.length)) } ?? []
        let headerText =
            headerLines.pointee.data.map {
                String(decoding: UnsafeRawBufferPointer(start: $0, count: headerLines.pointee.length), as: UTF8.self)
            } ?? ""
        return (HTTPResponse(status: status, headers: Self.parseHeaders(headerText), body: bytes, url: request.url), location)
    }

    /// Header fields of the final response (curl reports those of every hop; keep the last block).
    static func parseHeaders(_ text: String) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        for line in text.split(whereSeparator: \.isNewline) {  // "\r\n" is one Character
            if line.hasPrefix("HTTP/") {
                fields.removeAll()
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingSpaces))
        }
        return fields
    }

    /// The error code's text, and libcurl's account of this failure when it says more.
    static func message(_ code: CURLcode, detail: UnsafePointer<CChar>? = nil) -> String {
        let general = String(cString: curl_easy_strerror(code))
        guard let detail, detail.pointee != 0 else { return general }
        let specific = Printable.safe(String(String(cString: detail).trimmingSpaces), maxBytes: 200)
        if specific.isEmpty { return general }
        return specific.contains(general) ? specific : "\(general) (\(specific))"
    }
}
