import ArgumentParser
import Foundation
import Logging
import RISCConfig
import RISCCore
import RISCServer
import RISCStorage
import UnixSignals

extension RiscCommand {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the receiver: the RFC 8935 push endpoint, health and metrics.",
            discussion: """
                Settings come from flags, then RISC_* environment variables (listen.port is RISC_LISTEN_PORT), \
                then the file given with --config (TOML or JSON), then defaults; --print-config shows the result. \
                Only the audiences (your OAuth client IDs) \
                are required: with nothing else risc serves on 0.0.0.0:8443 (plain HTTP unless tls.certificate and \
                tls.key are set), keeps its data in ./data and trusts Google's RISC discovery document. \
                SIGTERM/SIGINT drain and exit 0; SIGHUP reopens the event log, reloads the TLS certificates and keys, and \
                reloads log.level, the limits, retention and the action table (a configuration that does not check is \
                refused whole, the running one kept). \
                Keys: \(ReceiverConfiguration.keys.map(\.key).joined(separator: ", ")).
                """
        )

        @Option(help: "Config file: TOML (.toml) or JSON (.json).")
        var config: String?

        @Option(name: .customLong("audience"), help: .setting("audiences"))
        var audiences: [String] = []

        @Option(help: .setting("data_dir"))
        var dataDir: String?

        @Option(help: .setting("store.url"))
        var storeURL: String?

        @Option(help: .setting("listen.host"))
        var host: String?

        @Option(help: .setting("listen.port"))
        var port: Int?

        @Option(help: .setting("admin.port"))
        var adminPort: Int?

        @Option(help: .setting("tls.certificate"))
        var tlsCert: String?

        @Option(help: .setting("tls.key"))
        var tlsKey: String?

        @Option(help: .setting("jwks_file"))
        var jwksFile: String?

        @Option(help: .setting("discovery_url"))
        var discoveryURL: String?

        @Option(help: .setting("issuer"))
        var issuer: String?

        @Option(name: .customLong("set"), help: "Any setting as KEY=VALUE (for example jwks.min_ttl=60); repeatable.")
        var overrides: [String] = []

        @Flag(help: .setting("event_log_stdout"))
        var logStdout = false

        @Flag(help: "Check the configuration and the files it names, print a summary, and exit (0 valid, 64 not).")
        var checkConfig = false

        @Flag(
            help:
                "With --check-config: also connect to the store as a start would (PostgreSQL: reachable, credentials, durability; either store: its schema version), without migrating; exit 69 when it cannot be reached now."
        )
        var connect = false

        @Flag(help: "Print the effective configuration (every setting, defaults included, with where each value came from; secrets redacted) as a config file, and exit.")
        var printConfig = false

        @Option(help: "The format of --print-config: toml (with sources as comments) or json.")
        var printConfigFormat: ConfigFile.Format = .toml

        @Flag(help: .hidden)
        var configReference = false

        @OptionGroup var global: GlobalOptions

        func flagValues() throws -> [String: JSONValue] {
            var values: [String: JSONValue] = [:]
            for override in overrides {
                guard let equals = override.firstIndex(of: "=") else {
                    throw ValidationError("--set expects KEY=VALUE, got '\(override)'")
                }
                let key = String(override[..<equals]), text = String(override[override.index(after: equals)...])
                values[key] = (try? JSONParser.parse(text)) ?? .string(text)
            }
            // `--audience a,b` is a list, as RISC_AUDIENCES=a,b and --set audiences=a,b are.
            if !audiences.isEmpty { values["audiences"] = .strings(audiences.flatMap(ConfigLayers.commaList)) }
            if let dataDir { values["data_dir"] = .string(dataDir) }
            if let storeURL { values["store.url"] = .string(storeURL) }
            if let host { values["listen.host"] = .string(host) }
            if let port { values["listen.port"] = .number(Double(port)) }
            if let adminPort { values["admin.port"] = .number(Double(adminPort)) }
            if let tlsCert { values["tls.certificate"] = .string(tlsCert) }
            if let tlsKey { values["tls.key"] = .string(tlsKey) }
            if let jwksFile { values["jwks_file"] = .string(jwksFile) }
            if let discoveryURL { values["discovery_url"] = .string(discoveryURL) }
            if let issuer { values["issuer"] = .string(issuer) }
            if logStdout { values["event_log_stdout"] = true }
            return values
        }

        /// A loaded configuration as the receiver runs it: with this build, `--log-level` over `log.level`.
        static func running(_ configuration: ReceiverConfiguration, logLevel: Logger.Level?) -> ReceiverConfiguration {
            var configuration = configuration
            configuration.build = (RiscCommand.release, BuildInfo.commit)
            if let logLevel { configuration.logLevel = logLevel }
            return configuration
        }

        /// The configuration as this start reads it (file, environment, flags; `--log-level` over
        /// `log.level`), again on each SIGHUP.
        func reloadSource(flags: [String: JSONValue]) -> ConfigurationSource {
            let (file, flagLevel) = (config, global.logLevel)
            return ConfigurationSource(load: { Self.running(try ReceiverConfiguration.load(file: file, flags: flags), logLevel: flagLevel) })
        }

        /// `--check-config`: the checks a start makes before it binds a port or opens the store
        /// (`Receiver.preflight`: files readable, secrets long enough, the data directory usable, the
        /// certificate and key a pair, key files that parse), then a one-screen summary.
        func check(_ configuration: ReceiverConfiguration) throws {
            let problems = Receiver.preflight(configuration)
            guard problems.isEmpty else {
                throw ConfigurationError(problems: problems)
            }
            /// A listener's certificate's expiry, when it serves HTTPS.
            func validity(_ listener: String) -> String? {
                guard let pair = configuration.tlsPairs.first(where: { $0.listener == listener }),
                    let until = try? ServerTLS.load(pair).notValidAfter
                else { return nil }
                let left = until - systemNow()
                // In its last two days by the hour: "0 days left" read as expired for a day.
                let remaining =
                    left < 0
                    ? "EXPIRED"
                    : left < 3_600
                        ? "\(Int(left / 60)) minutes left"
                        : left < 2 * 86_400 ? "\(Int(left / 3_600)) hours left" : "\(Int(left / 86_400)) days left"
                return "certificate valid until \(Timestamp.iso8601(until)) (\(remaining))"
            }
            print("configuration OK")
            for warning in Receiver.warnings(configuration) { print("  warning   \(warning)") }
            print("  listen    \(configuration.tlsCertificate == nil ? "http" : "https")://\(hostPort(configuration.host, configuration.port))\(configuration.eventsPath)")
            if let line = validity("public") { print("  tls       \(line)") }
            let adminScheme = configuration.adminTLSCertificate == nil ? "http" : "https"
            let mutual = configuration.adminTLSClientCA == nil ? "" : ", client certificates required"
            let api = configuration.adminTokenFile == nil ? "off" : configuration.adminAPIPort.map { "on its own listener \(adminScheme)://\(hostPort(configuration.adminAPIHost, $0))" } ?? "on"
            print("  admin     \(adminScheme)://\(hostPort(configuration.adminHost, configuration.adminPort))\(mutual) (account API \(api))")
            if let line = validity("admin") { print("  admin tls \(line)") }
            if configuration.hasGoogle {
                print("  audiences \(configuration.audiences.joined(separator: ", "))")
                print("  keys      \(configuration.jwksFile.map { "pinned \($0)" } ?? Redaction.url(configuration.discoveryURL))")
            } else {
                print("  google    none (no audiences: only the transmitters below)")
            }
            for transmitter in configuration.transmitters {
                let keys = transmitter.jwksFile.map { "pinned \($0)" } ?? Redaction.url(transmitter.discovery)
                let delivery = transmitter.delivery == "poll" ? "poll" : "push to \(transmitter.path ?? configuration.eventsPath)"
                print("  transmitter \(transmitter.name): \(transmitter.dialect.rawValue), \(transmitter.issuer), \(delivery), keys \(keys)")
            }
            print("  data      \(configuration.dataDirectory)")
            print("  store     \(configuration.store.url.map { "PostgreSQL \($0)" } ?? "embedded SQLite in the data directory")")
            // The accounts risc keeps are in the store above: the embedded one, or PostgreSQL.
            let accounts = configuration.store.url == nil ? "embedded account store" : "the account store in PostgreSQL"
            let actions =
                switch (configuration.webhookURL.map(Redaction.url), configuration.webhookScope) {
                case (nil, _): accounts
                case (let url?, .all): "webhook \(url)"
                case (let url?, .rows): "\(accounts); webhook \(url) for the events whose row names it"
                }
            print("  actions   \(actions)")
        }

        /// `--check-config --connect`: the store as a start would find it, read only.
        func checkStore(_ configuration: ReceiverConfiguration) async throws {
            let storage = try Storage(
                settings: configuration.store, dataDirectory: configuration.dataDirectory, tokenKeyFile: configuration.tokenKeyFile,
                needsTokenKey: false, logger: Logger(label: "risc") { _ in SwiftLogNoOpLogHandler() })
            defer { storage.close() }
            do {
                print("  store     \(try await storage.check())")
            } catch let error as StoreError where error.code == .refused {
                throw SetupProblem("store: \(error)")
            } catch {
                FileHandle.standardError.write(Data("risc serve: store: \(error)\n".utf8))
                throw ExitCode(69)  // EX_UNAVAILABLE: try again later
            }
        }

        /// Refusals of the store's (a locked data directory, a wrong token key, a PostgreSQL server
        /// that is not durable): configuration problems, exit 64.
        static func isRefusal(_ error: any Error) -> Bool {
            error is ConfigurationError || StoreError.isRefusal(error)
        }

        func run() async throws {
            if configReference { return print(ReceiverConfiguration.referenceTable, terminator: "") }
            // Configuration errors: the problems, exit 64, no usage text (nothing is wrong with the flags' syntax).
            var configuration: ReceiverConfiguration
            let flags: [String: JSONValue]
            do {
                flags = try flagValues()
                let loaded = try ReceiverConfiguration.loadWithOrigins(file: config, flags: flags)
                configuration = loaded.configuration
                if printConfig {
                    return print(configuration.printed(sources: loaded.origins, format: printConfigFormat, version: RiscCommand.version), terminator: "")
                }
                if checkConfig {
                    try check(configuration)
                    if connect { try await checkStore(configuration) }
                    return
                }
            } catch let error as ValidationError {
                FileHandle.standardError.write(Data("risc serve: \(error.message)\n".utf8))
                throw ExitCode(64)
            } catch let error as ConfigurationError {
                FileHandle.standardError.write(Data("risc serve: \(error)\n".utf8))
                throw ExitCode(64)
            }
            configuration = Self.running(configuration, logLevel: global.logLevel)
            let source = reloadSource(flags: flags)
            let level = LogLevelSetting(configuration.logLevel)
            let logger = global.makeLogger(level: level, format: configuration.logFormat)
            let receiver: Receiver
            do { receiver = try Receiver(configuration: configuration, logger: logger, source: source, logLevel: level) } catch  where Self.isRefusal(error) {
                // Configuration problems found while opening the store: exit 64 like the others.
                FileHandle.standardError.write(Data("risc serve: \(error)\n".utf8))
                throw ExitCode(64)
            }
            logger.notice(
                "risc starting",
                metadata: [
                    "risc.version": "\(RiscCommand.version)", "risc.pid": .stringConvertible(Int(getpid())),
                    "risc.listen": "\(hostPort(configuration.host, configuration.port))\(configuration.eventsPath)",
                    "risc.admin": "\(hostPort(configuration.adminHost, configuration.adminPort))", "risc.admin_tls": .stringConvertible(configuration.adminTLSCertificate != nil),
                    "risc.data_dir": "\(configuration.dataDirectory)", "risc.tls": .stringConvertible(configuration.tlsCertificate != nil),
                    "risc.store": "\(receiver.storage.backendName)",
                ])
            let lifecycle = Task { await Self.announce(receiver, logger: logger) }
            defer { lifecycle.cancel() }
            do { try await receiver.run() } catch  where error is ListenError || Self.isRefusal(error) {
                // A port another process holds may be free at the next try (69); the rest is the configuration's (64).
                FileHandle.standardError.write(Data("risc serve: \(error)\n".utf8))
                throw ExitCode((error as? ListenError)?.temporary == true ? 69 : 64)
            }
            logger.notice("risc stopped: listeners closed, queued work left for the next start, store closed")
        }

        /// Once every listener runs (public, admin, and the account API's with admin.api.port): a
        /// `risc ready` line (with what the store holds from before, the recovery a restart does)
        /// and systemd's `READY=1`; on SIGTERM or SIGINT, a `risc stopping` line and `STOPPING=1`
        /// while the receiver drains.
        static func announce(_ receiver: Receiver, logger: Logger) async {
            var publicPorts = receiver.publicPorts.makeAsyncIterator(), adminPorts = receiver.adminPorts.makeAsyncIterator()
            guard let port = await publicPorts.next(), let adminPort = await adminPorts.next() else { return }
            var apiPorts = receiver.apiPorts.makeAsyncIterator()
            var metadata: Logger.Metadata = ["risc.port": "\(port)", "risc.admin_port": "\(adminPort)"]
            if let apiPort = await apiPorts.next() { metadata["risc.api_port"] = "\(apiPort)" }  // none without admin.api.port
            metadata["risc.queue_depth"] = "\((try? await receiver.storage.health.queueDepth()) ?? 0)"
            logger.notice("risc ready", metadata: metadata)
            SystemdNotify.send("READY=1\nSTATUS=accepting SETs on port \(port)\nMAINPID=\(getpid())")
            for await signal in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                logger.notice("risc stopping: draining requests in flight", metadata: ["risc.signal": "\(signal)"])
                SystemdNotify.send("STOPPING=1")
                return
            }
        }
    }
}

extension ArgumentHelp {
    /// A flag's help from the setting it sets (`ReceiverConfiguration.settings`), named after it.
    static func setting(_ key: String) -> ArgumentHelp {
        let help = ReceiverConfiguration.helpWithDefault(key)
        return ArgumentHelp("\(help.prefix(1).uppercased())\(help.dropFirst()) (\(key)).")
    }
}
