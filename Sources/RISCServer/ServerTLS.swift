import Foundation
import NIOSSL
import RISCCore
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
    let clientCAPath: String?
    /// The settings' prefix in messages: `tls` (public listener) or `admin.tls`.
    let setting: String
    private let current: Mutex<Loaded>

    init(certificate: String, key: String, clientCA: String? = nil, setting: String = "tls") throws {
        certificatePath = certificate
        keyPath = key
        clientCAPath = clientCA
        self.setting = setting
        current = Mutex(try Self.load(certificate: certificate, key: key, clientCA: clientCA, setting: setting))
    }

    /// The context for a new connection.
    var context: NIOSSLContext { current.withLock { $0.context } }
    var notValidAfter: Double { current.withLock { $0.notValidAfter } }

    /// Reads the files again and, if they load, uses them from the next connection on.
    func reload() throws -> Loaded {
        let loaded = try Self.load(certificate: certificatePath, key: keyPath, clientCA: clientCAPath, setting: setting)
        current.withLock { $0 = loaded }
        return loaded
    }

    /// The listener's pair as `ReceiverConfiguration.tlsPairs` names it.
    public static func load(_ pair: (listener: String, setting: String, certificate: String, key: String, clientCA: String?)) throws -> Loaded {
        try load(certificate: pair.certificate, key: pair.key, clientCA: pair.clientCA, setting: pair.setting)
    }

    /// Loads a chain and key as the listener would (`risc serve --check-config` uses it too); with
    /// `clientCA`, clients must present a certificate that CA bundle verifies (mutual TLS).
    public static func load(certificate: String, key: String, clientCA: String? = nil, setting: String = "tls") throws -> Loaded {
        let chain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
        } catch {
            throw LoadError(description: "\(setting).certificate: cannot load \(certificate) (\(error))")
        }
        guard let leaf = chain.first else { throw LoadError(description: "\(setting).certificate: no certificate in \(certificate)") }
        do {
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw LoadError(description: "\(setting).key: cannot load \(key) (\(error))")
        }
        var settings = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        settings.minimumTLSVersion = .tlsv12
        settings.cipherSuites = TLSPolicy.tls12CipherSuites
        if let clientCA {
            let authorities: [NIOSSLCertificate]
            do { authorities = try NIOSSLCertificate.fromPEMFile(clientCA) } catch {
                throw LoadError(description: "\(setting).client_ca: cannot load \(clientCA) (\(error))")
            }
            guard !authorities.isEmpty else { throw LoadError(description: "\(setting).client_ca: no certificate in \(clientCA)") }
            settings.trustRoots = .certificates(authorities)
            settings.certificateVerification = .noHostnameVerification
        }
        do {
            return Loaded(context: try NIOSSLContext(configuration: settings), notValidAfter: Double(leaf.notValidAfter))
        } catch {
            throw LoadError(description: "\(setting): \(certificate) and \(key) do not make a usable pair (\(error))")
        }
    }
}
