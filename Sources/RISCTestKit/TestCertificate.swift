public import Foundation
public import RISCCore

/// A self-signed P-256 (or, with `rsa`, RSA 2048) certificate for `localhost`, made with the
/// openssl command, for tests that run HTTPS on loopback (the certificate is also the CA bundle
/// clients trust).
public struct TestCertificate: Sendable {
    public let certificatePath: String
    public let keyPath: String

    public struct Failed: Error {}

    public init(directory: URL, rsa: Bool = false) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        keyPath = directory.appendingPathComponent("key.pem").path
        let openssl = ChildProcess()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments =
            ["openssl", "req", "-x509", "-newkey"] + (rsa ? ["rsa:2048"] : ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
            + [
                "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", keyPath, "-out",
                certificatePath,
            ]
        guard try openssl.runToEnd().succeeded else { throw Failed() }
    }

    /// Copies this pair over the files a server is configured with (a renewal, for reload tests);
    /// `keyFrom` puts another key there instead (a mismatched pair).
    public func install(certificateAt certificateTarget: String, keyAt keyTarget: String, keyFrom keySource: String? = nil) throws {
        for (source, target) in [(certificatePath, certificateTarget), (keySource ?? keyPath, keyTarget)] {
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: source, toPath: target)
        }
    }
}

/// A service account JSON key file like the Cloud console's, with an RSA key generated for this
/// test process (once: a 2048-bit key took seconds on a loaded machine, on a thread every
/// receiver in the process needed) and a key ID of its own.
public struct TestServiceAccount: Sendable {
    private static let processKey = Result { try PrivateKey.generate(.rsa(bits: 2048)) }

    public let path: String
    public let clientEmail: String
    public let keyID: String
    public let key: PrivateKey

    /// `key`: another key than the process's (an impostor's).
    public init(directory: URL, clientEmail: String = "risc-admin@example-project.iam.gserviceaccount.com", key: PrivateKey? = nil) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = try key ?? Self.processKey.get()
        self.clientEmail = clientEmail
        keyID = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(40))
        self.key = key
        path = directory.appendingPathComponent("service-account.json").path
        let json = """
            {"type": "service_account", "project_id": "example-project", "private_key_id": "\(keyID)",
             "private_key": "\((try key.pemRepresentation).replacingOccurrences(of: "\n", with: "\\n"))", "client_email": "\(clientEmail)",
             "client_id": "1234567890", "token_uri": "https://oauth2.googleapis.com/token"}
            """
        guard FileManager.default.createFile(atPath: path, contents: Data(json.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
    }
}
