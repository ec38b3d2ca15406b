import Foundation
import Logging
import RISCClient
import RISCCore
import RISCLocal
import RISCStorage

#if canImport(Glibc)
import Glibc
#endif

/// What a start checks before it binds a port or opens the store (and `--check-config` checks the
/// same way), and what it warns about.
extension Receiver {
    /// What a start warns about (and `--check-config` prints): a listener serving plain HTTP on
    /// an address other hosts can reach.
    public static func warnings(_ configuration: ReceiverConfiguration) -> [String] {
        var warnings: [String] = []
        if configuration.tlsCertificate == nil && !URLPolicy.isLoopback(host: configuration.host) {
            warnings.append("serving plain HTTP on a non-loopback address (\(configuration.host)): put a TLS-terminating proxy in front, or set tls.certificate and tls.key")
        }
        var admin = [(configuration.adminHost, configuration.adminPort)]
        if let port = configuration.adminAPIPort { admin.append((configuration.adminAPIHost, port)) }
        for (host, port) in admin where configuration.adminTLSCertificate == nil && !URLPolicy.isLoopback(host: host) {
            warnings.append("the admin listener \(hostPort(host, port)) serves plain HTTP on a non-loopback address: set admin.tls.certificate and admin.tls.key")
        }
        return warnings
    }

    /// Why nothing can be made in `parent` (the system's words); nil: a file (or, with `directory`,
    /// a directory) was made there and removed again. Tried rather than asked: as root, access()
    /// calls sysfs and procfs writable, and the start then failed where the check said OK.
    static func writeProbe(in parent: String, directory: Bool) -> String? {
        let probe = (parent as NSString).appendingPathComponent(".risc-check-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        if directory {
            guard mkdir(probe, 0o700) == 0 else { return String(cString: strerror(errno)) }
            rmdir(probe)
        } else {
            let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else { return String(cString: strerror(errno)) }
            close(descriptor)
            unlink(probe)
        }
        return nil
    }

    /// Everything about the files and directories a configuration names that would stop a start,
    /// checked without binding a port or opening the store: `risc serve --check-config` and the
    /// start run this same list, so the check refuses whatever the start refuses.
    public static func preflight(_ configuration: ReceiverConfiguration) -> [String] {
        var problems: [String] = []
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: configuration.dataDirectory, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                problems.append("data_dir: \(configuration.dataDirectory) exists and is not a directory")
            } else if let failure = writeProbe(in: configuration.dataDirectory, directory: false) {
                problems.append("data_dir: \(configuration.dataDirectory) is not writable: \(failure)")
            }
        } else if !configuration.dataDirectory.isEmpty {
            var parent = configuration.dataDirectory
            repeat {
                parent = PathText.directory(of: parent)
                if parent.isEmpty { parent = "." }
            } while !files.fileExists(atPath: parent, isDirectory: &isDirectory) && parent != "/" && parent != "."
            if !isDirectory.boolValue {
                problems.append("data_dir: \(configuration.dataDirectory) cannot be created (\(parent) is not a directory)")
            } else if let failure = writeProbe(in: parent, directory: true) {
                problems.append("data_dir: \(configuration.dataDirectory) cannot be created in \(parent): \(failure)")
            }
        }
        problems += entryProblems(configuration)
        problems += trustProblems(configuration)
        problems += listenProblems(configuration)
        let named: [(String, String?)] = [
            ("tls.certificate", configuration.tlsCertificate), ("tls.key", configuration.tlsKey), ("jwks_file", configuration.jwksFile),
            ("admin.tls.certificate", configuration.adminTLSCertificate), ("admin.tls.key", configuration.adminTLSKey),
            ("admin.tls.client_ca", configuration.adminTLSClientCA),
            ("store.password_file", configuration.store.passwordFile), ("store.ca_file", configuration.store.caFile),
            ("webhook.ca_file", configuration.webhookURL == nil ? nil : configuration.webhookCAFile),
            ("event_log_checkpoint_ca_file", configuration.eventLogCheckpointURL == nil ? nil : configuration.eventLogCheckpointCAFile),
            ("accounts.token_key_file", configuration.tokenKeyFile), ("event_log_checkpoint_key", configuration.eventLogCheckpointKey),
            ("linking.notices.service_account_file", configuration.noticeIssuer == nil ? nil : configuration.noticeServiceAccountFile),
        ]
        let transmitterFiles = configuration.transmitters.flatMap(startFiles)
        var unreadablePaths: Set<String> = []
        for (setting, path) in named + transmitterFiles {
            guard let path, let why = FileContents.regularFileProblem(path) else { continue }
            problems.append("\(setting): cannot read \(path): \(why)")
            unreadablePaths.insert(path)
        }
        // What follows reads the files named above that can be read, and only those.
        func readable(_ path: String?) -> String? { path.flatMap { unreadablePaths.contains($0) || !files.fileExists(atPath: $0) ? nil : $0 } }
        let secrets: [(String, String?, String)] = [
            ("admin.token_file", configuration.adminTokenFile, "token"), ("webhook.secret_file", configuration.webhookSecretFile, "secret"),
            ("linking.client_secret_file", configuration.linkingRevocationPath == nil ? nil : configuration.linkingClientSecretFile, "secret"),
        ]
        for (setting, path, what) in secrets {
            guard let path else { continue }
            do {
                if try readSecret(path, setting: setting).count < 16 { problems.append("\(setting): the \(what) in \(path) must be at least 16 bytes") }
            } catch let error as ConfigurationError {
                problems += error.problems
            } catch {
                problems.append("\(setting): \(error)")
            }
        }
        if let path = readable(configuration.tokenKeyFile), let data = try? FileContents.read(path, regularFile: true, limit: 4_096),
            data.count < TokenKey.length
        {
            problems.append("accounts.token_key_file: \(path) holds \(data.count) bytes; a token key has at least \(TokenKey.length)")
        }
        func check(_ body: () throws -> Void) {
            do { try body() } catch { problems += (error as? ConfigurationError)?.problems ?? ["\(error)"] }
        }
        if let path = readable(configuration.jwksFile) { check { _ = try pinnedKeySet(path, setting: "jwks_file") } }
        // Each transmitter's files that its start reads, once all of them can be read.
        for transmitter in configuration.transmitters where startFiles(of: transmitter).allSatisfy({ $0.path == nil || readable($0.path) != nil }) {
            if let path = transmitter.jwksFile { check { _ = try pinnedKeySet(path, setting: "transmitters.\(transmitter.name).jwks_file") } }
            check {
                _ = try transmitter.pushCredential()
                if transmitter.delivery == "poll" { _ = try transmitter.managementAuthorization() }
            }
        }
        if let path = configuration.eventLogCheckpointKey {
            let inside = URL(fileURLWithPath: path).standardizedFileURL.path.hasPrefix(URL(fileURLWithPath: configuration.dataDirectory).standardizedFileURL.path + "/")
            if inside {
                problems.append("event_log_checkpoint_key: \(path) is inside data_dir; keep the key that signs the log's checkpoints outside it")
            } else if readable(path) != nil {
                do { _ = try CheckpointKey(file: path) } catch { problems.append("event_log_checkpoint_key: \(error)") }
            }
        }
        // Unreadable files are named above; the pairs that can be read must load.
        for pair in configuration.tlsPairs where [pair.certificate, pair.key, pair.clientCA ?? pair.key].allSatisfy({ readable($0) != nil }) {
            do { _ = try ServerTLS.load(pair) } catch { problems.append("\(error)") }
        }
        if configuration.noticeIssuer != nil, configuration.noticeProblems.isEmpty, readable(configuration.noticeServiceAccountFile) != nil {
            do { _ = try ReceiverStorage.makePublisher(configuration: configuration) } catch let error as ConfigurationError {
                problems += error.problems
            } catch {
                problems.append("linking.notices: \(error)")
            }
        }
        return problems
    }

    /// A transmitter's files as its start reads them, each with its setting: the credentials it
    /// polls with only when it polls (a push transmitter's `management_token_file` is for `risc
    /// stream` alone).
    static func startFiles(of transmitter: TransmitterSettings) -> [(setting: String, path: String?)] {
        let key = "transmitters.\(transmitter.name)"
        let polls = transmitter.delivery == "poll"
        return [
            ("\(key).ca_file", transmitter.caFile), ("\(key).jwks_file", transmitter.jwksFile), ("\(key).authorization_file", transmitter.authorizationFile),
            ("\(key).management_token_file", polls ? transmitter.managementTokenFile : nil),
            ("\(key).client_secret_file", polls ? transmitter.clientSecretFile : nil), ("\(key).client_key_file", polls ? transmitter.clientKeyFile : nil),
        ]
    }

    /// The listeners' addresses that no start could take (`ListenError.probe`).
    static func listenProblems(_ configuration: ReceiverConfiguration) -> [String] {
        var listeners = [
            ("listen.host, listen.port", configuration.host, configuration.port), ("admin.host, admin.port", configuration.adminHost, configuration.adminPort),
        ]
        if let port = configuration.adminAPIPort { listeners.append(("admin.api.host, admin.api.port", configuration.adminAPIHost, port)) }
        // A name server that did not answer is left to the start, which may find it back.
        return listeners.compactMap { setting, host, port in
            ListenError.probe(setting: setting, host: host, port: port).flatMap { $0.temporary ? nil : $0.description }
        }
    }

    /// What risc keeps in the data directory, each where it must be of its kind: a directory in the
    /// event log's or the token key's place, or a file in the journal's, stopped a start with the
    /// system's bare words (`Code=21 "Is a directory"`) or was taken for a key file to chmod.
    static func entryProblems(_ configuration: ReceiverConfiguration) -> [String] {
        var entries: [(name: String, isDirectory: Bool, what: String)] = [("journal", true, "the journal"), ("jwks-cache.json", false, "the last good key set")]
        if !configuration.eventLogToStandardOutput { entries.append(("events.log", false, "the event log")) }
        if configuration.tokenKeyFile == nil { entries.append(("token-key", false, "the token key")) }
        var problems: [String] = []
        for entry in entries {
            let path = (configuration.dataDirectory as NSString).appendingPathComponent(entry.name)
            guard let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType,
                (type == .typeDirectory) != entry.isDirectory
            else { continue }
            problems.append("data_dir: \(path) is \(entry.isDirectory ? "not a directory" : "a directory"), where risc keeps \(entry.what): move it away")
        }
        return problems
    }

    /// Whether the files risc keeps its secrets in can be trusted (issue 24 #6): no symbolic link
    /// in the data directory, ever; unless `accept_insecure_permissions`, a data directory and a
    /// notice-key directory of this user's, not writable by group or others, and key files (the
    /// token key, the notice keys) of this user's, open to no one else.
    static func trustProblems(_ configuration: ReceiverConfiguration) -> [String] {
        let check = !configuration.acceptInsecurePermissions
        var problems = PrivateFiles.dataDirectoryProblems(configuration.dataDirectory, checkOwnership: check)
        guard check else { return problems }
        let tokenKey = configuration.tokenKeyFile ?? (configuration.dataDirectory as NSString).appendingPathComponent("token-key")
        if let problem = PrivateFiles.keyFileProblem(tokenKey, setting: configuration.tokenKeyFile == nil ? "data_dir" : "accounts.token_key_file") {
            problems.append(problem)
        }
        if configuration.noticeIssuer != nil, let directory = configuration.noticeKeyDirectory {
            if let problem = PrivateFiles.directoryProblem(directory, setting: "linking.notices.key_dir") { problems.append(problem) }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for name in names.sorted() where name.hasSuffix(".pem") {
                let path = (directory as NSString).appendingPathComponent(name)
                if let problem = PrivateFiles.keyFileProblem(path, setting: "linking.notices.key_dir") { problems.append(problem) }
            }
        }
        return problems
    }

    /// A secret kept in a file (webhook secret, admin token), as text: without surrounding white
    /// space or a leading byte-order mark (`FileContents.text`).
    static func readSecret(_ path: String, setting: String) throws -> [UInt8] {
        let data: [UInt8]
        do { data = try FileContents.readText(path, regularFile: true, limit: 1 << 20) } catch { throw ConfigurationError(problems: ["\(setting): \(error)"]) }
        return Array(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    }

    /// The event log's checkpoints, when `event_log_checkpoint_key` is set: each also goes to the
    /// diagnostic log (journald), so a copy leaves the data directory as it is made.
    static func checkpoints(_ configuration: ReceiverConfiguration, logger: Logger) throws -> JSONLinesEventLog.Checkpoints? {
        guard let path = configuration.eventLogCheckpointKey else { return nil }
        let key = try CheckpointKey(file: path)
        return JSONLinesEventLog.Checkpoints(
            key: key, interval: configuration.eventLogCheckpointInterval,
            publish: { note in
                logger.notice("event log checkpoint", metadata: ["risc.checkpoint": "\(note.replacingOccurrences(of: "\n", with: "\\n"))"])
                guard let url = configuration.eventLogCheckpointURL else { return }
                // On the event log's writer thread, with a short limit: lines wait (never lost)
                // while a slow endpoint answers, and the shutdown checkpoint is sent before the exit.
                let request = HTTPRequest(
                    method: "POST", url: url, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(note.utf8), timeout: 3,
                    connectTimeout: 2)
                var client = CurlHTTPClient(pool: .receiver)
                if let caFile = configuration.eventLogCheckpointCAFile { client.caBundlePath = caFile }
                do {
                    let response = try client.performBlocking(request)
                    if !(200..<300).contains(response.status) {
                        logger.warning("event log checkpoint not delivered", metadata: ["risc.status": "\(response.status)"])
                    }
                } catch {
                    logger.warning("event log checkpoint not delivered", metadata: ["risc.error": "\(Printable.safe("\(error)"))"])
                }
            })
    }
}
