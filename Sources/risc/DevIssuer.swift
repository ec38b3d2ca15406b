import ArgumentParser
import Foundation
import RISCTestKit

extension RiscCommand {
    struct DevIssuer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dev-issuer",
            abstract: "Serve a discovery document and JWKS for test keys on loopback, so `risc serve` runs with no Google involved.",
            discussion: """
                Then: risc serve --discovery-url http://127.0.0.1:PORT/.well-known/risc-configuration \
                --issuer https://accounts.google.com/ --audience risc-test-client.apps.googleusercontent.com, \
                and sign events with `risc sign --keys DIR`. Runs until interrupted.
                """
        )

        @Option(help: "Key directory (as `risc keys generate` writes it).") var keys: String = "keys/test"
        @Option(help: "Loopback port.") var port: Int = 8780
        @Option(help: "The issuer the discovery document names (and `risc sign --iss` should use).")
        var issuer: String = SETFactory.defaultIssuer
        @Option(help: "Cache-Control max-age for the JWKS, seconds.") var maxAge: Int = 300

        func run() async throws {
            let directory = try KeyDirectory(url: URL(fileURLWithPath: keys))
            let server = try LocalIssuer(jwks: String(decoding: directory.jwksData, as: UTF8.self), issuer: issuer, port: port)
            server.update { $0.maxAge = maxAge }
            print("discovery: \(server.discoveryURL)")
            print("jwks:      \(server.baseURL)/jwks  (kids: \(directory.entries.map(\.keyID).joined(separator: ", ")))")
            print("issuer:    \(issuer)")
            fflush(nil)
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(3_600))
            }
            server.stop()
        }
    }
}
