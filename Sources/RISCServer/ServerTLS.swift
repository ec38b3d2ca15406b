import Foundation
import NIOSSL
import Synchronization

/// The public listener's certificate chain and key, reloadable without a restart (SIGHUP, after
/// a renewal): new connections get the pair loaded last, open ones keep theirs. A pair that does
/// not load (unreadable, malformed, key not matching the certificate) is refused and the pair in
/// use stays.
public final class ServerTLS: Sendable {
    public struct Loaded: Sendable {
        let context: NIOSSLContext
        /// The leaf certificate's notAfter, seconds since the epoch.
        public let notValidAfter: Double
    }

    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    let certificatePath: String
    let keyPath: String
    private let current: Mutex<Loaded>

    init(certificate: String, key: String) throws {
        certificatePath = certificate
        keyPath = key
        current = Mutex(try Self.load(certificate: certificate, key: key))
    }

    /// The context for a new connection.
    var context: NIOSSLContext { current.withLock { $0.context } }
    var notValidAfter: Double { current.withLock { $0.notValidAfter } }

    /// Reads both files again and, if they load, uses them from the next connection on.
    func reload() throws -> Loaded {
        let loaded = try Self.load(certificate: certificatePath, key: keyPath)
        current.withLock { $0 = loaded }
        return loaded
    }

    /// Loads a chain and key as the listener would (`risc serve --check-config` uses it too).
    public static func load(certificate: String, key: String) throws -> Loaded {
        let chain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
        } catch {
            throw LoadError(description: "tls.certificate: cannot load \(certificate) (\(error))")
        }
        guard let leaf = chain.first else { throw LoadError(description: "tls.certificate: no certificate in \(certificate)") }
        do {
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw LoadError(description: "tls.key: cannot load \(key) (\(error))")
        }
        var settings = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        settings.minimumTLSVersion = .tlsv12
        do {
            return Loaded(context: try NIOSSLContext(configuration: settings), notValidAfter: Double(leaf.notValidAfter))
        } catch {
            throw LoadError(description: "tls: \(certificate) and \(key) do not make a usable pair (\(error))")
        }
    }
}
