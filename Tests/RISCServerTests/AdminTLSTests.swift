import Foundation
import RISCClient
import RISCCore
import RISCLocal
import RISCTestKit
import Synchronization
import Testing

@testable import RISCServer

/// `admin.tls.*` and `admin.api.*`: HTTPS (mutual, with a client CA) on the admin listener, and
/// the account API on a listener of its own.
@Suite("Admin listener TLS and the account API's own listener", .serialized)
struct AdminTLSTests {
    static let token = "admin-token-0123456789abcdef"

    static func directory() -> URL {
        Scratch.root.appendingPathComponent("risc-admin-tls-\(UUID().uuidString)")
    }

    static func tokenFile(in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("admin-token").path
        try Data("\(token)\n".utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("admin.tls serves health and metrics over HTTPS only; admin.api.port moves the account API to its own HTTPS listener; SIGHUP's reload renews the admin certificate")
    func httpsAndSeparateAPI() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try TestCertificate(directory: directory.appendingPathComponent("first"))
        let renewed = try TestCertificate(directory: directory.appendingPathComponent("renewed"))
        let cert = directory.appendingPathComponent("admin-cert.pem").path, key = directory.appendingPathComponent("admin-key.pem").path
        try first.install(certificateAt: cert, keyAt: key)
        let tokenFile = try Self.tokenFile(in: directory)
        let harness = try ServerHarness {
            $0.adminTLSCertificate = cert
            $0.adminTLSKey = key
            $0.adminTokenFile = tokenFile
            $0.adminAPIPort = 0
        }
        try await harness.start()
        #expect(harness.adminURL.hasPrefix("https://localhost:") && harness.apiURL.hasPrefix("https://localhost:"))
        let trusting = CurlHTTPClient.patient(caBundlePath: first.certificatePath)
        let auth = [("Authorization", "Bearer \(Self.token)")]

        let metrics = try await trusting.perform(HTTPRequest(url: harness.adminURL + "/metrics"))
        #expect(metrics.status == 200)
        #expect(String(decoding: metrics.body, as: UTF8.self).contains(#"risc_tls_certificate_expiry_timestamp_seconds{listener="admin"} "#))
        let ready = try JSONParser.parseObject(try await trusting.perform(HTTPRequest(url: harness.adminURL + "/readyz")).body)
        #expect(ready["admin_tls"]?.objectValue?["not_after"]?.stringValue?.hasSuffix("Z") == true)
        // Plain HTTP to the admin port gets nothing.
        let plain = harness.adminURL.replacingOccurrences(of: "https://localhost", with: "http://127.0.0.1")
        await #expect(throws: FetchError.self) {
            let response = try await CurlHTTPClient().perform(HTTPRequest(url: plain + "/metrics"))
            throw FetchError(url: plain, "answered \(response.status)")
        }
        // The account API is not beside the metrics any more, and nothing but it is on its listener.
        #expect(try await trusting.perform(HTTPRequest(url: harness.adminURL + "/admin/accounts/110169484474386276334", headers: auth)).status == 404)
        #expect(try await trusting.perform(HTTPRequest(url: harness.apiURL + "/metrics")).status == 404)
        #expect(try await trusting.perform(HTTPRequest(url: harness.apiURL + "/admin/accounts/110169484474386276334")).status == 401)
        let link = #"{"subject":"110169484474386276334","user_id":"u-tls"}"#
        let created = try await trusting.perform(HTTPRequest(method: "POST", url: harness.apiURL + "/admin/accounts", headers: auth, body: Array(link.utf8)))
        #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
        let shown = try await trusting.perform(HTTPRequest(url: harness.apiURL + "/admin/accounts/110169484474386276334", headers: auth))
        #expect(try JSONParser.parseObject(shown.body)["user_id"] == "u-tls")

        // Renewal: new connections get the renewed certificate, on both admin listeners.
        try renewed.install(certificateAt: cert, keyAt: key)
        #expect(harness.receiver.reloadTLS())
        let trustingRenewed = CurlHTTPClient.patient(caBundlePath: renewed.certificatePath)
        #expect(try await trustingRenewed.perform(HTTPRequest(url: harness.adminURL + "/healthz")).status == 200)
        #expect(try await trustingRenewed.perform(HTTPRequest(url: harness.apiURL + "/admin/accounts/110169484474386276334", headers: auth)).status == 200)
        await #expect(throws: FetchError.self) { _ = try await trusting.perform(HTTPRequest(url: harness.adminURL + "/healthz")) }
        #expect(harness.eventLogLines.contains { $0["step"] == "tls" && $0["listener"] == "admin" && $0["outcome"] == "reloaded" })
        try await harness.stop()
        harness.issuer.stop()
    }

    /// Found: both listeners took NIOSSL's default TLS 1.2 suites, which include RSA key
    /// transport (`AES128-SHA`, `AES128-GCM-SHA256`: no forward secrecy) and CBC with SHA-1
    /// (`ECDHE-RSA-AES128-SHA`). RFC 8935 §5.3 has RFC 7525 apply, and RFC 9325, which replaces
    /// it, says not to negotiate either. Only ECDHE with AES-GCM or ChaCha20-Poly1305 in TLS 1.2;
    /// TLS 1.3 as it is; below 1.2 nothing.
    @Test("both listeners: TLS 1.2 only with forward-secret AEAD suites (RFC 9325), TLS 1.3, nothing older")
    func cipherSuites() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try TestCertificate(directory: directory.appendingPathComponent("rsa"), rsa: true)
        let harness = try ServerHarness {
            $0.tlsCertificate = certificate.certificatePath
            $0.tlsKey = certificate.keyPath
            $0.adminTLSCertificate = certificate.certificatePath
            $0.adminTLSKey = certificate.keyPath
        }
        try await harness.start()
        let adminPort = try #require(URLComponents(string: harness.adminURL)?.port)
        /// Whether a handshake offering only `options` (a version, a suite) succeeds.
        func handshake(_ port: Int, _ options: [String]) async throws -> Bool {
            try await BlockingPool.waits.run {
                Result {
                    let client = ChildProcess()
                    client.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                    client.arguments = ["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-brief"] + options
                    return try client.runToEnd(input: Data()).succeeded
                }
            }.get()
        }
        for port in [harness.publicPort, adminPort] {
            for suite in ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"] {
                #expect(try await handshake(port, ["-tls1_2", "-cipher", suite]), "\(port): \(suite) refused")
            }
            for suite in ["AES128-SHA", "AES256-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384"] {
                #expect(try await !handshake(port, ["-tls1_2", "-cipher", suite]), "\(port): \(suite) negotiated")
            }
            #expect(try await handshake(port, ["-tls1_3"]))
            #expect(try await !handshake(port, ["-tls1_1"]))
        }
        try await harness.stop()
    }

    /// An HTTPS endpoint whose certificate no system CA vouches for (another receiver's listener,
    /// started), and that certificate, its own CA.
    static func privateCAEndpoint(in directory: URL) async throws -> (ServerHarness, TestCertificate) {
        let certificate = try TestCertificate(directory: directory.appendingPathComponent("endpoint"))
        let endpoint = try ServerHarness {
            $0.tlsCertificate = certificate.certificatePath
            $0.tlsKey = certificate.keyPath
        }
        try await endpoint.start()
        return (endpoint, certificate)
    }

    /// Found: a webhook served with a certificate from the site's own CA (an internal endpoint)
    /// could be reached only once that CA was in the system's trust store, where it then vouched
    /// for every host risc fetches from, Google's key hosts among them. `webhook.ca_file` trusts
    /// a CA for the webhook alone.
    @Test("webhook.ca_file: a webhook whose certificate the site's own CA issued is reached with that CA alone; without it the handshake fails")
    func webhookPrivateCA() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The site's endpoint: another receiver's HTTPS listener, which answers a webhook body 400.
        let (site, certificate) = try await Self.privateCAEndpoint(in: directory)
        let secret = directory.appendingPathComponent("webhook-secret").path
        try Data(repeating: 7, count: 32).write(to: URL(fileURLWithPath: secret))
        for trusted in [false, true] {
            let receiver = try ServerHarness {
                $0.webhookURL = "https://localhost:\(site.publicPort)/events"
                $0.webhookSecretFile = secret
                if trusted { $0.webhookCAFile = certificate.certificatePath }
            }
            try await receiver.start()
            let jti = UUID().uuidString
            #expect(try await receiver.post(try receiver.token(jti: jti)).status == 202)
            var error: String?
            _ = await waitWhile {
                error = receiver.eventLogLines.first { $0["step"] == "applied" && $0["jti"]?.stringValue == jti && $0["outcome"] == "failed" }?["error"]?.stringValue
                return error == nil
            }
            if trusted {
                #expect(error?.contains("webhook answered HTTP 400") == true, "\(error ?? "no attempt")")
            } else {
                #expect(error?.contains("certificate") == true, "\(error ?? "no attempt")")
            }
            try await receiver.stop()
            receiver.issuer.stop()
        }
        try await site.stop()
        site.issuer.stop()
    }

    /// Found: `event_log_checkpoint_url`, the off-box witness of the event log's checkpoints, was
    /// reached with the system's CAs only, as the webhook and transmitters were before their
    /// `ca_file`: a witness on the organisation's own CA meant trusting that CA for Google's key
    /// hosts too. `event_log_checkpoint_ca_file` trusts it for the witness alone.
    @Test("event_log_checkpoint_ca_file: the checkpoint witness behind the site's own CA is reached with that CA alone; without it the handshake fails")
    func checkpointWitnessPrivateCA() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The witness: another receiver's HTTPS listener, which answers a text body 4xx.
        let (witness, certificate) = try await Self.privateCAEndpoint(in: directory)
        let keyFile = directory.appendingPathComponent("checkpoint.key").path
        try CheckpointKey.generate(name: "node-w").file.write(toFile: keyFile, atomically: true, encoding: .utf8)
        for trusted in [false, true] {
            var configuration = ReceiverConfiguration()
            configuration.audiences = ["witness-test"]
            configuration.eventLogCheckpointKey = keyFile
            configuration.eventLogCheckpointURL = "https://localhost:\(witness.publicPort)/events"
            if trusted { configuration.eventLogCheckpointCAFile = certificate.certificatePath }
            #expect(configuration.problems.isEmpty, "\(configuration.problems)")
            let captured = CapturedLog()
            let checkpoints = try #require(try Receiver.checkpoints(configuration, logger: captured.logger))
            checkpoints.publish("risc-event-log/node-w\n1\n")
            let warning = try #require(captured.lines.withLock { $0.first { $0.contains("checkpoint not delivered") } })
            if trusted {
                #expect(warning.contains("risc.status=4"), "\(warning)")
            } else {
                #expect(warning.contains("certificate"), "\(warning)")
            }
        }
        try await witness.stop()
        witness.issuer.stop()
    }

    @Test("admin.tls.client_ca: a client without a certificate, or with one the CA did not issue, is refused in the handshake; one it issued is served")
    func mutualTLS() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try TestCertificate(directory: directory.appendingPathComponent("server"))
        let client = try TestCertificate(directory: directory.appendingPathComponent("client"))
        let stranger = try TestCertificate(directory: directory.appendingPathComponent("stranger"))
        let harness = try ServerHarness {
            $0.adminTLSCertificate = server.certificatePath
            $0.adminTLSKey = server.keyPath
            $0.adminTLSClientCA = client.certificatePath  // self-signed: it is its own CA
        }
        try await harness.start()
        var anonymous = CurlHTTPClient.patient(caBundlePath: server.certificatePath)
        await #expect(throws: FetchError.self) { _ = try await anonymous.perform(HTTPRequest(url: harness.adminURL + "/metrics")) }
        anonymous.clientCertificate = (stranger.certificatePath, stranger.keyPath)
        await #expect(throws: FetchError.self) { _ = try await anonymous.perform(HTTPRequest(url: harness.adminURL + "/metrics")) }
        var known = CurlHTTPClient.patient(caBundlePath: server.certificatePath)
        known.clientCertificate = (client.certificatePath, client.keyPath)
        #expect(try await known.perform(HTTPRequest(url: harness.adminURL + "/metrics")).status == 200)
        // The public listener is not affected: Google presents no client certificate.
        #expect(try await harness.post(try harness.token(jti: "mtls-admin-only")).status == 202)
        try await harness.stop()
        harness.issuer.stop()
    }

    @Test("admin.tls and admin.api settings that cannot work are configuration problems; preflight names unreadable or mismatched files")
    func problems() throws {
        var configuration = ReceiverConfiguration()
        configuration.audiences = ["a"]
        configuration.adminTLSCertificate = "/etc/risc/admin.pem"
        configuration.adminAPIPort = 9090
        #expect(configuration.problems.contains("admin.tls.certificate and admin.tls.key go together"))
        #expect(configuration.problems.contains { $0.hasPrefix("admin.api.port needs admin.token_file") })
        #expect(configuration.problems.contains("admin.api.port must differ from admin.port and listen.port"))
        configuration.adminTLSCertificate = nil
        configuration.adminTLSClientCA = "/etc/risc/ca.pem"
        #expect(configuration.problems.contains("admin.tls.client_ca needs admin.tls.certificate and admin.tls.key"))

        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let one = try TestCertificate(directory: directory.appendingPathComponent("one"))
        let other = try TestCertificate(directory: directory.appendingPathComponent("other"))
        configuration = ReceiverConfiguration()
        configuration.dataDirectory = directory.appendingPathComponent("data").path
        configuration.adminTLSCertificate = one.certificatePath
        configuration.adminTLSKey = other.keyPath
        #expect(Receiver.preflight(configuration).contains { $0.hasPrefix("admin.tls: ") && $0.contains("do not make a usable pair") })
        configuration.adminTLSKey = one.keyPath
        configuration.adminTLSClientCA = directory.appendingPathComponent("missing-ca.pem").path
        #expect(Receiver.preflight(configuration).contains("admin.tls.client_ca: cannot read \(directory.appendingPathComponent("missing-ca.pem").path): No such file or directory"))
        try Data("not a certificate".utf8).write(to: directory.appendingPathComponent("bad-ca.pem"))
        configuration.adminTLSClientCA = directory.appendingPathComponent("bad-ca.pem").path
        #expect(Receiver.preflight(configuration).contains { $0.hasPrefix("admin.tls.client_ca: ") }, "\(Receiver.preflight(configuration))")
        configuration.adminTLSClientCA = one.certificatePath
        #expect(Receiver.preflight(configuration).isEmpty, "\(Receiver.preflight(configuration))")
    }
}
