import Foundation
import RISCClient
import RISCCore
import RISCTestKit
import Testing

@Suite("HTTP over libcurl")
struct CurlHTTPClientTests {
    @Test("GET and POST against a loopback server; headers and body come back")
    func roundTrip() async throws {
        let server = try LoopbackHTTPServer { request in
            .json(
                #"{"method":"\#(request.method)","len":\#(request.body.count),"h":"\#(request.header("x-test") ?? "")"}"#,
                headers: [("ETag", "\"abc\""), ("Cache-Control", "max-age=120"), ("Age", "20")])
        }
        defer { server.stop() }
        let client = CurlHTTPClient()
        let get = try await client.perform(HTTPRequest(url: server.baseURL + "/x", headers: [("X-Test", "1")]))
        #expect(get.status == 200)
        #expect(String(decoding: get.body, as: UTF8.self).contains(#""method":"GET""#))
        #expect(get.header("ETag") == "\"abc\"")
        #expect(get.maxAge == 100)
        let post = try await client.perform(HTTPRequest(method: "POST", url: server.baseURL + "/y", body: Array("hello".utf8)))
        #expect(String(decoding: post.body, as: UTF8.self).contains(#""method":"POST","len":5"#))
    }

    @Test("max-age and Age are delta-seconds: digits only, huge values capped; anything else ignored")
    func cacheLifetimes() async throws {
        let cases: [(control: String, age: String?, expected: Double?)] = [
            ("max-age=nan", nil, nil), ("max-age=1e400", nil, nil), ("max-age=-5", nil, nil), ("max-age=0x10", nil, nil),
            ("max-age=300", "inf", 300), ("max-age=99999999999999999999", nil, 2_147_483_648), ("max-age=60", "90", 0),
        ]
        for c in cases {
            let server = try LoopbackHTTPServer { _ in .json("{}", headers: [("Cache-Control", c.control)] + (c.age.map { [("Age", $0)] } ?? [])) }
            defer { server.stop() }
            let response = try await CurlHTTPClient().perform(HTTPRequest(url: server.baseURL + "/jwks"))
            #expect(response.maxAge == c.expected, "\(c.control) Age: \(c.age ?? "-")")
        }
    }

    /// Found: libcurl takes milliseconds as an integer, and a timeout of 1e300 seconds trapped
    /// converting to one (a configured webhook timeout reached it on the first delivery).
    @Test("a timeout of any size is taken (as the longest libcurl holds), never a trap")
    func hugeTimeouts() async throws {
        let server = try LoopbackHTTPServer { _ in .json("{}") }
        defer { server.stop() }
        for timeout in [1e300, .infinity, 9e15] {
            let response = try await CurlHTTPClient().perform(HTTPRequest(url: server.baseURL + "/x", timeout: timeout, connectTimeout: timeout))
            #expect(response.status == 200)
        }
    }

    @Test("plain HTTP is refused for anything but loopback; malformed URLs are refused")
    func urlPolicy() async {
        let client = CurlHTTPClient()
        for url in ["http://example.com/jwks", "ftp://127.0.0.1/x", "http://user:pw@127.0.0.1/x", "not a url", "file:///etc/passwd"] {
            await #expect(throws: FetchError.self) { _ = try await client.perform(HTTPRequest(url: url)) }
        }
        #expect(URLPolicy().refusal(for: "https://www.googleapis.com/oauth2/v3/certs") == nil)
        #expect(URLPolicy().refusal(for: "http://[::1]:8080/x") == nil)
        #expect(URLPolicy(allowPlainHTTPOnLoopback: false).refusal(for: "http://127.0.0.1/x") != nil)
        // Found: `--check-config` passed URLs no fetch can use (a space in the host, a port out of
        // range, an escape in the host), so a typo showed only later, as a key set never fetched.
        for (url, reason) in [
            ("https://keys example/x", "space or control character"), ("https://x.example/a b", "space or control character"),
            ("https://x.example:99999/", "port"), ("https://x.example:0/", "port"), ("https://x.example:-1/", "port"),
            ("https://x.example:44a/", "port"), ("https://ex%00ample.com/", "host"), ("https://[v1.x]/", "host"), ("https://[::1]x/", "port"),
        ] {
            #expect(URLPolicy().refusal(for: url)?.contains(reason) == true, "\(url): \(URLPolicy().refusal(for: url) ?? "allowed")")
        }
        for url in ["https://x.example:443/a?b=1#c", "https://x.example:/", "https://[2001:db8::1]:8443/x", "https://例え.jp/x", "https://X.Example/"] {
            #expect(URLPolicy().refusal(for: url) == nil, "\(url): \(URLPolicy().refusal(for: url) ?? "")")
        }
    }

    @Test("issue 24 #10: loopback is decided from the parsed address, never from a host name's first characters")
    func loopbackFromTheAddress() {
        for host in ["127.attacker.example", "127.0.0.1.nip.io", "127.example", "127.1", "::1.example", "0x7f.0.0.1", "localhost.attacker.example"] {
            #expect(!URLPolicy.isLoopback(host: host), "\(host) counted as loopback")
            #expect(URLPolicy().refusal(for: "http://\(host)/jwks") != nil, "plain HTTP allowed to \(host)")
        }
        for host in ["127.0.0.1", "127.255.0.9", "::1", "0:0:0:0:0:0:0:1", "[::1]", "localhost", "LOCALHOST"] {
            #expect(URLPolicy.isLoopback(host: host), "\(host) not counted as loopback")
        }
        #expect(URLPolicy().refusal(for: "http://[0:0:0:0:0:0:0:1]:8080/x") == nil)
    }

    @Test("redirects: followed on the same host, refused to another host")
    func redirects() async throws {
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/same": .init(status: 302, headers: [("Location", "/final")])
            case "/other": .init(status: 302, headers: [("Location", "http://localhost:1/final")])
            default: .json(#"{"ok":true}"#)
            }
        }
        defer { server.stop() }
        let client = CurlHTTPClient()
        let followed = try await client.perform(HTTPRequest(url: server.baseURL + "/same"))
        #expect(followed.status == 200)
        await #expect(throws: FetchError.self) { _ = try await client.perform(HTTPRequest(url: server.baseURL + "/other")) }
    }

    @Test("a response over the size cap fails; a timeout fails")
    func limits() async throws {
        let server = try LoopbackHTTPServer { request in
            if request.path == "/slow" { Thread.sleep(forTimeInterval: 2) }
            return .init(body: [UInt8](repeating: 0x41, count: 100_000))
        }
        defer { server.stop() }
        let client = CurlHTTPClient()
        let error = await #expect(throws: FetchError.self) {
            _ = try await client.perform(HTTPRequest(url: server.baseURL + "/big", maxResponseBytes: 10_000))
        }
        #expect(error?.description.contains("larger") == true)
        await #expect(throws: FetchError.self) {
            _ = try await client.perform(HTTPRequest(url: server.baseURL + "/slow", timeout: 0.5))
        }
        let ok = try await client.perform(HTTPRequest(url: server.baseURL + "/big", maxResponseBytes: 200_000))
        #expect(ok.body.count == 100_000)
    }

    /// Found: libcurl offered OpenSSL's default TLS 1.2 suites (RSA key transport and CBC among
    /// them) to the issuer's key set, Google's RISC API, the webhook and the notice endpoint, so a
    /// server that chose `AES128-SHA` was used. risc's outbound TLS offers what its listeners and
    /// its store's client do (`TLSPolicy`, RFC 9325).
    @Test("outbound HTTPS refuses a server that offers only RSA key transport or CBC suites; ECDHE + AES-GCM is used")
    func cipherSuites() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("risc-curl-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory, rsa: true)
        func fetches(_ cipher: String) async throws -> Bool {
            let port = try PostgresCluster.freePort()
            let server = ChildProcess()
            server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            server.arguments = [
                "openssl", "s_server", "-quiet", "-accept", "127.0.0.1:\(port)", "-cert", certificate.certificatePath, "-key", certificate.keyPath,
                "-no_tls1_3", "-cipher", cipher, "-www",
            ]
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            let client = CurlHTTPClient(caBundlePath: certificate.certificatePath)
            // Until the server listens (a refused connection), then the handshake's outcome.
            var fetched: Bool?
            for _ in 0..<200 where fetched == nil {
                do {
                    fetched = try await client.perform(HTTPRequest(url: "https://localhost:\(port)/")).status == 200
                } catch let error as FetchError where "\(error)".contains("onnect") && !"\(error)".contains("SSL") {
                    try await Task.sleep(for: .milliseconds(50))
                } catch {
                    fetched = false
                }
            }
            await BlockingPool.waits.run { server.killGroupAndWait() }
            if fetched == nil { Issue.record("openssl s_server did not listen") }
            return fetched ?? false
        }
        #expect(try await !fetches("AES128-SHA"), "RSA key transport")
        #expect(try await !fetches("ECDHE-RSA-AES128-SHA"), "CBC")
        #expect(try await fetches("ECDHE-RSA-AES128-GCM-SHA256"))
    }

    @Test("a closed port is a transport error, not a crash")
    func refused() async throws {
        let server = try LoopbackHTTPServer { _ in .init() }
        let port = server.port
        server.stop()
        await #expect(throws: FetchError.self) { _ = try await CurlHTTPClient().perform(HTTPRequest(url: "http://127.0.0.1:\(port)/")) }
    }
}
