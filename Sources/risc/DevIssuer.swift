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

        @Option(help: "Key directory (as `risc keys generate` writes it).", transform: OptionRange.path) var keys: String = "keys/test"
        @Option(parsing: .unconditional, help: "Loopback port (0: one the system picks; the discovery line says which).") var port: Int = 8780
        @Option(help: "The issuer the discovery document names (and `risc sign --iss` should use).")
        var issuer: String = SETFactory.defaultIssuer
        @Option(parsing: .unconditional, help: "Cache-Control max-age for the JWKS, seconds.") var maxAge: Int = 300
        @Flag(help: "Serve an SSF 1.0 transmitter instead: metadata, JWKS, a token endpoint, stream management, push and poll.") var ssf = false
        @Option(help: "With --ssf: the aud its SETs carry.") var audience: String = "https://risc.example.com/ssf"
        @Option(help: "With --ssf: the OAuth client id risc authenticates with.") var clientID: String = "risc-dev"
        @Option(help: "With --ssf: the client's secret (client_secret_basic or _post).") var clientSecret: String = "risc-dev-secret"

        func validate() throws {
            try OptionRange.port(port, lowest: 0)
            try OptionRange.atLeast(0, maxAge, "--max-age")
        }

        func run() async throws {
            if ssf { return try await serveSSF() }
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

        /// `--ssf`: an SSF transmitter on loopback (`SSFTestTransmitter`), with what to configure.
        func serveSSF() async throws {
            let transmitter = try SSFTestTransmitter(audience: audience, clients: [.init(id: clientID, secret: clientSecret)], port: port)
            print(
                """
                SSF transmitter: \(transmitter.issuer)
                metadata:        \(transmitter.metadataURL)
                token endpoint:  \(transmitter.tokenURL) (client \(clientID), client_secret_basic or client_secret_post)
                emit an event:   curl -X POST '\(transmitter.server.baseURL)/dev/emit?stream_id=ID' -d '{"type":"session-revoked","subject":{"format":"email","email":"ada@example.com"}}'

                [transmitters.dev]
                dialect = "ssf"
                issuer = "\(transmitter.issuer)"
                audiences = ["\(audience)"]
                algorithms = ["ES256"]
                path = "/events/dev"
                receiver_url = "http://127.0.0.1:8443/events/dev"
                token_endpoint = "\(transmitter.tokenURL)"
                client_id = "\(clientID)"
                client_secret_file = "FILE holding \(clientSecret)"
                """)
            fflush(nil)
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3_600)) }
            transmitter.stop()
        }
    }
}
