import CoreMetrics
import Foundation
import Logging
import RISCClient
import RISCCore
import RISCLocal
import RISCSQLite
import RISCServer
import RISCStorage
import RISCTestKit

/// A real `Receiver` on 127.0.0.1 (ports picked by the OS) with a loopback issuer and the test keys.
final class ServerHarness: @unchecked Sendable {
    static let keys = try! KeyDirectory.repositoryTestKeys()
    let issuer: LocalIssuer
    let dataDirectory: String
    var receiver: Receiver!
    var task: Task<Void, any Error>!
    var publicURL = ""
    /// The public listener's port (for raw connections).
    var publicPort = 0
    var adminURL = ""
    /// The account API's own listener (`admin.api.port`), else empty.
    var apiURL = ""
    let client: CurlHTTPClient
    let factory: SETFactory
    var configuration: ReceiverConfiguration
    /// The receiver's swift-metrics backend; nil: its own Prometheus registry.
    var metricsFactory: (any MetricsFactory)?
    /// Where the receiver reads its configuration again (`reloadConfiguration`, SIGHUP), and the
    /// level its logger's handler shares.
    var source: ConfigurationSource?
    var logLevel: LogLevelSetting?
    /// The receiver's clock (its intake's times, the limiter's and the refused lines' windows),
    /// when a test drives it; the wall clock otherwise.
    var clock: TestClock?
    /// Where the receiver's diagnostic log goes, when a test reads it; nowhere otherwise.
    var log: CapturedLog?

    init(dataDirectory: String? = nil, issuer: LocalIssuer? = nil, edit: (inout ReceiverConfiguration) -> Void = { _ in }) throws {
        self.issuer = try issuer ?? LocalIssuer(jwks: String(decoding: Self.keys.jwksData, as: UTF8.self))
        self.dataDirectory =
            dataDirectory
            ?? Scratch.root.appendingPathComponent("risc-server-\(UUID().uuidString)").path
        var configuration = ReceiverConfiguration()
        configuration.audiences = [SETFactory.defaultAudience]
        configuration.discoveryURL = self.issuer.discoveryURL
        configuration.dataDirectory = self.dataDirectory
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.adminPort = 0
        configuration.retryAfter = 7
        configuration.jwksFailureRetryInterval = 0
        configuration.jwksMinimumTTL = 60
        // A TLS handshake on the admin listener waits for a thread of Swift concurrency's, which a
        // test process shares with every other test: 5 s closed one mid-handshake on a loaded
        // machine. Tests of the deadline set their own.
        configuration.adminHandshakeTimeout = 60
        edit(&configuration)
        self.configuration = configuration
        client = CurlHTTPClient.patient(caBundlePath: configuration.tlsCertificate)
        factory = SETFactory(issuer: self.issuer.baseURL + "/", signer: Self.keys.entry(for: .rs256)!.signer)
    }

    /// A receiver on this harness's configuration, not started.
    func makeReceiver() throws -> Receiver {
        var logger = log?.logger ?? Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        if log == nil { logger.logLevel = .critical }
        return try Receiver(
            configuration: configuration, logger: logger, metricsFactory: metricsFactory, source: source, logLevel: logLevel, clock: clock?.function)
    }

    func start() async throws {
        receiver = try makeReceiver()
        let receiver = self.receiver!
        task = Task { try await receiver.run() }
        var publicPorts = receiver.publicPorts.makeAsyncIterator()
        var adminPorts = receiver.adminPorts.makeAsyncIterator()
        let scheme = configuration.tlsCertificate == nil ? "http" : "https"
        let host = configuration.tlsCertificate == nil ? "127.0.0.1" : "localhost"
        publicPort = await publicPorts.next() ?? 0
        publicURL = "\(scheme)://\(host):\(publicPort)"
        let admin = configuration.adminTLSCertificate == nil ? "http://127.0.0.1" : "https://localhost"
        adminURL = "\(admin):\(await adminPorts.next() ?? 0)"
        var apiPorts = receiver.apiPorts.makeAsyncIterator()
        if let port = await apiPorts.next() { apiURL = "\(admin):\(port)" }
    }

    func stop() async throws {
        await receiver.shutdown()
        try await task.value
    }

    func post(
        _ body: String, contentType: String? = "application/secevent+jwt", path: String? = nil, forwardedFor: String? = nil,
        headers extra: [(name: String, value: String)] = []
    ) async throws -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")] + extra
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let forwardedFor { headers.append(("X-Forwarded-For", forwardedFor)) }
        let response = try await client.perform(
            HTTPRequest(method: "POST", url: publicURL + (path ?? configuration.eventsPath), headers: headers, body: Array(body.utf8)))
        if response.status == 202 { await indexed() }
        return response
    }

    /// Waits until the embedded store's index holds what its journal acknowledged (a 202 goes
    /// once a SET is durable in the journal; its row, actions and log lines come just after), so
    /// a test reads them as soon as `post` returns.
    func indexed() async {
        guard let events = try? receiver.storage.store.embedded?.events() else { return }
        _ = await waitWhile(every: 0.002) { events.isIndexing }
    }

    /// A keep-alive POST of a fresh valid SET, as bytes for a raw connection.
    func rawRequest(_ jti: String) throws -> [UInt8] {
        let token = try token(jti: jti)
        return Array("POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: \(token.utf8.count)\r\n\r\n\(token)".utf8)
    }

    /// Whether a new raw connection gets a SET answered 202 within 1,000 tries 20 ms apart (a
    /// closed connection's place is given back once the server has seen the close, which took
    /// over the 2 s of 100 tries on a loaded machine).
    func newConnectionServed(port: Int, jti: String) async throws -> Bool {
        for attempt in 0..<1_000 {
            if try RawConnection.Held(port: port).exchange(try rawRequest("\(jti)-\(attempt)"))?.hasPrefix("HTTP/1.1 202") == true { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// The value of one series (`name` or `name{labels}`) in a Prometheus exposition, whatever its
    /// number format (`2`, `2.0`).
    static func value(_ exposition: String, _ series: String) -> Double? {
        exposition.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    func get(_ url: String) async throws -> HTTPResponse {
        try await client.perform(HTTPRequest(url: url))
    }

    /// The event log's lines, once the store's index holds what was acknowledged (its lines come
    /// just after a journaled SET's 202; a raw connection's answer does not wait for them).
    var eventLogLines: [JSONObject] {
        if let events = try? receiver.storage.store.embedded?.events() {
            var waited = 0
            while events.isIndexing && waited < 5_000 {
                usleep(2_000)
                waited += 1
            }
        }
        receiver.eventLog.settle()
        let text = (try? String(contentsOfFile: dataDirectory + "/events.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parseObject(Array($0.utf8)) }
    }

    func token(jti: String = UUID().uuidString, type: EventType = .sessionsRevoked, edit: (inout JSONObject) -> Void = { _ in }) throws -> String {
        var claims = factory.claims(type: type, subject: factory.accountSubject("110169484474386276334"), jti: jti)
        edit(&claims)
        return try factory.sign(claims)
    }
}
