import Foundation
import RISCConfig
import RISCCore
import RISCServer
import RISCTestKit
import Testing

/// Configuration is a library (issue 27): what every other configuration test checks by running
/// the binary can be checked in process.
@Suite("configuration loading, in process")
struct ConfigurationLoadingTests {
    static func file(_ text: String, suffix: String = "toml") throws -> String {
        let path = Scratch.root.appendingPathComponent("risc-config-\(UUID().uuidString).\(suffix)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("flags over RISC_* variables over the file over defaults, each value's source recorded")
    func layering() throws {
        let path = try Self.file("audiences = [\"from-file\"]\n[listen]\nport = 9443\nhost = \"127.0.0.2\"\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let loaded = try ReceiverConfiguration.loadWithOrigins(
            file: path, flags: ["listen.port": .number(7443)], environment: ["RISC_LISTEN_HOST": "127.0.0.3"])
        #expect(loaded.configuration.audiences == ["from-file"])
        #expect(loaded.configuration.port == 7443)
        #expect(loaded.configuration.host == "127.0.0.3")
        #expect(loaded.configuration.adminPort == ReceiverConfiguration().adminPort)
        #expect(loaded.origins["listen.port"] == "flag")
        #expect(loaded.origins["listen.host"] == "environment RISC_LISTEN_HOST")
        #expect(loaded.origins["audiences"] == "file \(path)")
        #expect(loaded.origins["admin.port"] == nil)
    }

    /// Found: a missing config file, a directory and `/dev/null` were all "cannot read the config
    /// file", whatever the cause; a pipe would have been read once and hung the SIGHUP reload.
    @Test("a config file that cannot be read is named with the reason; only a regular file is read, without waiting on a pipe")
    func unreadableConfigFile() throws {
        let directory = Scratch.root.appendingPathComponent("risc-config-dir-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fifo = directory + "/risc.toml"
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (path, reason) in [
            (directory + "/missing.toml", "No such file or directory"), (directory, "Is a directory"), (fifo, "not a regular file"),
            ("/dev/null", "not a regular file"),
        ] {
            let error = #expect(throws: ConfigurationError.self) { try ReceiverConfiguration.loadWithOrigins(file: path, flags: [:], environment: [:]) }
            #expect(error?.problems.contains("\(path): cannot read the config file: \(reason)") == true, "\(error?.problems ?? [])")
        }
    }

    /// Found: `port = 8443` at the top of a config file (it belongs under `[listen]`), `data-dir`
    /// for `data_dir`, `audience` for `audiences`, `RISC_PORT`: each was "unknown setting 'port'"
    /// and nothing more, and the operator had to find the key in the reference.
    @Test("an unknown setting or variable names the settings it may have meant")
    func unknownSettingsSuggested() throws {
        func problems(file text: String? = nil, flags: [String: JSONValue] = [:], environment: [String: String] = [:]) throws -> [String] {
            let path = try text.map { try Self.file("audiences = [\"a\"]\n" + $0) }
            defer { path.map { try? FileManager.default.removeItem(atPath: $0) } }
            do {
                _ = try ReceiverConfiguration.loadWithOrigins(file: path, flags: flags, environment: environment)
                return []
            } catch let error as ConfigurationError { return error.problems }
        }
        for (text, expected) in [
            ("port = 8443\n", "unknown setting 'port' (did you mean admin.port, listen.port or admin.api.port?)"),
            ("data-dir = \"/d\"\n", "unknown setting 'data-dir' (did you mean data_dir?)"),
            ("audience = [\"b\"]\n", "unknown setting 'audience' (did you mean audiences?)"),
            ("[jwks]\nmin_tll = 300\n", "unknown setting 'jwks.min_tll' (did you mean jwks.min_ttl?)"),
            ("[webhook]\nURL = \"https://x.example\"\n", "unknown setting 'webhook.URL' (did you mean webhook.url?)"),
        ] {
            let found = try problems(file: text)
            #expect(found.contains { $0.hasSuffix(expected) }, "\(text): \(found)")
        }
        let flag = try problems(flags: ["audiences": .array(["a"]), "host": .string("127.0.0.1")])
        #expect(flag.contains("--set: unknown setting 'host' (did you mean admin.host, listen.host or admin.api.host?)"), "\(flag)")
        let variable = try problems(flags: ["audiences": .array(["a"])], environment: ["RISC_PORT": "1", "RISC_DATADIR": "/d"])
        #expect(variable.contains("environment: unknown variable RISC_PORT (did you mean RISC_ADMIN_PORT, RISC_LISTEN_PORT or RISC_ADMIN_API_PORT?)"), "\(variable)")
        #expect(variable.contains("environment: unknown variable RISC_DATADIR (did you mean RISC_DATA_DIR?)"), "\(variable)")
        // Nothing near: no guess.
        let far = try problems(file: "zzz_unrelated_setting = 1\n")
        #expect(far.contains { $0.hasSuffix("unknown setting 'zzz_unrelated_setting'") }, "\(far)")
    }

    @Test("every problem at once, each naming its key and where its value came from")
    func problems() throws {
        let path = try Self.file("audiences = [\"a\"]\nlisten = 8443\nretry_after = 0\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: ConfigurationError.self) {
            try ReceiverConfiguration.loadWithOrigins(file: path, flags: ["admin.port": .number(99_999)], environment: [:])
        }
        let problems = error?.problems ?? []
        #expect(problems.contains { $0.contains("'listen' is a table of settings (listen.host, listen.port), not a value") }, "\(problems)")
        #expect(problems.contains("admin.port must be 0–65535, got 99999 (admin.port from flag)"), "\(problems)")
        #expect(problems.contains { $0.hasPrefix("retry_after must be at least 1 second") && $0.hasSuffix("(retry_after from file \(path))") }, "\(problems)")
        // Found: a negative clock_skew loaded, and then every SET (its iat now) was logged with a
        // warning that it came from the future.
        let skew = #expect(throws: ConfigurationError.self) {
            try ReceiverConfiguration.loadWithOrigins(file: nil, flags: ["audiences": .array([.string("a")]), "clock_skew": .number(-1)], environment: [:])
        }
        #expect(skew?.problems.contains { $0.hasPrefix("clock_skew must be 0 or more seconds, got -1") } == true, "\(skew?.problems ?? [])")
    }

    /// Found: a row for a misspelt reason of Google's `account-disabled` (`"hijackin"`, meant to
    /// change what a hijacking does) loaded as a row no SET would ever match, and the hijacking row
    /// stayed as it was, unnoticed. Google defines two reasons (spec §1.8); any other is refused,
    /// naming them (the row `""` covers every other reason, a future one included).
    @Test("an account-disabled row for a reason Google does not send is a problem naming the two it does")
    func accountDisabledReasons() throws {
        func problems(_ reason: String) -> [String] {
            let table: JSONValue = ["account-disabled": .object([reason: ["end_sessions"]])]
            do {
                _ = try ReceiverConfiguration.loadWithOrigins(
                    file: nil, flags: ["audiences": .array([.string("a")]), "actions.table": table], environment: [:])
                return []
            } catch let error as ConfigurationError { return error.problems } catch { return ["\(error)"] }
        }
        #expect(problems("hijackin").contains { $0.contains("actions.table.account-disabled.hijackin: Google's account-disabled reasons are hijacking and bulk-account") }, "\(problems("hijackin"))")
        for reason in ["hijacking", "bulk-account", "", "default"] { #expect(problems(reason).isEmpty, "\(reason): \(problems(reason))") }
    }

    /// Found: `events_path = "/events?x=1"` (or with a space or a `#`) and `listen.host = "not a
    /// host"` or an empty `admin.host` passed `--check-config`. The first served every SET a 404 (a
    /// request's path never holds a query, a space or a fragment); the others failed at the start
    /// with `SocketAddressError.UnknownHost`, exit 1, which the unit restarts for ever.
    @Test("paths and listener hosts that can never work are problems named at load")
    func unusablePathsAndHosts() throws {
        for (key, value, expected) in [
            ("events_path", "/events?x=1", "events_path must be a path of printable ASCII without '?', '#' or spaces, got '/events?x=1'"),
            ("events_path", "/ev ents", "events_path must be a path of printable ASCII"), ("events_path", "/events#f", "events_path must be a path"),
            ("listen.host", "not a host", "listen.host must be an IP address or a host name, got 'not a host'"),
            ("admin.host", "", "admin.host must be an IP address or a host name, got ''"),
            ("listen.host", "-bad.example", "listen.host must be an IP address or a host name"), ("listen.host", "*", "listen.host must be an IP address"),
        ] {
            let error = #expect(throws: ConfigurationError.self, "\(key)=\(value)") {
                try ReceiverConfiguration.loadWithOrigins(file: nil, flags: ["audiences": .strings(["a"]), key: .string(value)], environment: [:])
            }
            #expect(error?.problems.contains { $0.contains(expected) } == true, "\(error?.problems ?? [])")
        }
        var flags: [String: JSONValue] = ["audiences": .strings(["a"]), "linking.google_client_id": .string("c")]
        flags["linking.revocation_path"] = .string("/revoke?x")
        flags["linking.client_secret_file"] = .string("/nonexistent")
        let revocation = #expect(throws: ConfigurationError.self) { try ReceiverConfiguration.loadWithOrigins(file: nil, flags: flags, environment: [:]) }
        #expect(revocation?.problems.contains { $0.contains("linking.revocation_path must be a path of printable ASCII") } == true, "\(revocation?.problems ?? [])")
        // What does work still loads: names, addresses of both families, a path with its own segments.
        for (key, value) in [("listen.host", "receiver-1.internal"), ("listen.host", "::1"), ("admin.host", "localhost"), ("listen.host", "risc_receiver"), ("events_path", "/risc/v1/events")] {
            #expect(throws: Never.self, "\(key)=\(value)") {
                try ReceiverConfiguration.loadWithOrigins(file: nil, flags: ["audiences": .strings(["a"]), key: .string(value)], environment: [:])
            }
        }
    }

    /// Found: an issuer or audience that no SET can carry passed `--check-config`, and the receiver
    /// then refused every SET of Google's (400 `invalid_issuer` or `invalid_audience`, which Google
    /// does not retry): `--issuer ''` (an unset variable in a unit file), `issuer = " https://…"`
    /// and `audiences = ["123.apps.googleusercontent.com "]` (copied with a space).
    @Test("an issuer, issuer alias, audience or Google client id that is empty or holds a space or control character is a problem, named")
    func issuerAndAudienceText() throws {
        for (key, value, expected) in [
            ("issuer", JSONValue.string(""), "issuer must not be empty nor hold spaces or control characters, got ''"),
            ("issuer", .string(" https://accounts.google.com/"), "issuer must not be empty nor hold spaces or control characters, got ' https://accounts.google.com/'"),
            ("issuer_aliases", .strings(["accounts.google.com\t"]), "issuer_aliases must not be empty nor hold spaces or control characters, got 'accounts.google.com\\x09'"),
            ("audiences", .strings(["123.apps.googleusercontent.com "]), "an audience must not be empty nor hold spaces or control characters, got '123.apps.googleusercontent.com '"),
            // The client id Google authenticates its unlink calls with: every one would be refused 401.
            ("linking.google_client_id", .string(" 123.apps.googleusercontent.com"), "linking.google_client_id must not be empty nor hold spaces or control characters"),
        ] {
            var flags: [String: JSONValue] = ["audiences": .strings(["a"]), "jwks_file": .string("/etc/risc/jwks.json")]
            flags[key] = value
            let error = #expect(throws: ConfigurationError.self, "\(key)=\(value)") {
                try ReceiverConfiguration.loadWithOrigins(file: nil, flags: flags, environment: [:])
            }
            #expect(error?.problems.contains { $0.contains(expected) } == true, "\(error?.problems ?? [])")
        }
        #expect(throws: Never.self) {
            try ReceiverConfiguration.loadWithOrigins(
                file: nil, flags: ["audiences": .strings(["123.apps.googleusercontent.com"]), "issuer": .string("accounts.google.com")], environment: [:])
        }
    }

    /// Found: a duration written as text was taken whatever its size: `infs` and `1e300d` loaded,
    /// and `risc serve --print-config` then crashed turning them into whole days (an `Int64` out of
    /// range). A number in a JSON file was already refused when not finite, but not when absurd.
    @Test("a duration that is not finite or past 100 years is a problem, named; every duration loaded prints and loads back")
    func absurdDurations() throws {
        for (key, value) in [
            ("actions.retry_window", JSONValue.string("infs")), ("actions.retry_window", .string("1e300d")),
            ("retention.duplicates", .string("36501d")), ("event_log_rotate_interval", .number(1e300)),
        ] {
            let error = #expect(throws: ConfigurationError.self, "\(key) = \(value.serialized)") {
                try ReceiverConfiguration.loadWithOrigins(file: nil, flags: ["audiences": .strings(["a"]), key: value], environment: [:])
            }
            #expect(error?.problems.contains { $0.contains(key) && $0.contains("at most 36500d") } == true, "\(error?.problems ?? [])")
        }
        #expect(durationSeconds("infs") == nil && durationSeconds("1e300d") == nil && durationSeconds("36500d") == 36_500 * 86_400)
        let longest = try ReceiverConfiguration.loadWithOrigins(
            file: nil, flags: ["audiences": .strings(["a"]), "actions.retry_window": .string("36500d")], environment: [:])
        let printed = try Self.file(longest.configuration.printed(sources: longest.origins, format: .toml, version: "test"))
        defer { try? FileManager.default.removeItem(atPath: printed) }
        #expect(try ReceiverConfiguration.load(file: printed, flags: [:], environment: [:]).retry.window == 36_500 * 86_400)
        // What code (not a file) sets is printed as seconds rather than crash the printer.
        var set = ReceiverConfiguration()
        (set.retry.window, set.retention.duplicates) = (.infinity, 1e300)
        let text = set.printed(sources: [:], format: .toml, version: "test")
        #expect(text.contains("retry_window = inf") || text.contains("retry_window = \"inf"), "\(text)")
    }

    /// Found: `jwks.min_ttl = 1e300` (with `max_ttl`) loaded, and the receiver crashed at its first
    /// key fetch (an `Int` out of range in the fetch's log line); `webhook.timeout = 1e300` would
    /// have crashed the first delivery the same way (libcurl takes milliseconds as an integer).
    @Test("the key set's timings and the webhook's timeout must be finite and sensible, each a problem named")
    func absurdSeconds() throws {
        for (key, value, expected) in [
            ("jwks.max_ttl", 1e300, "jwks.max_ttl must be at most 30 days"), ("jwks.min_ttl", .infinity, "jwks.min_ttl must be at most 30 days"),
            ("jwks.max_staleness", 1e300, "jwks.max_staleness must be at most 30 days"),
            ("jwks.unknown_kid_cooldown", 1e300, "jwks.unknown_kid_cooldown must be at most 30 days"),
            ("jwks.failure_retry", 1e300, "jwks.failure_retry must be at most 30 days"),
            // Found: a negative value loaded, meaning what 0 means (retry at once) without saying so.
            ("jwks.failure_retry", -1, "jwks.failure_retry must be 0 (retry at once) or more seconds"),
            ("webhook.timeout", 1e300, "webhook.timeout must be more than 0 and at most 3600 seconds"),
        ] {
            var flags: [String: JSONValue] = ["audiences": .strings(["a"]), key: .number(value)]
            if key == "jwks.min_ttl" { flags["jwks.max_ttl"] = .number(value) }
            let error = #expect(throws: ConfigurationError.self, "\(key)") {
                try ReceiverConfiguration.loadWithOrigins(file: nil, flags: flags, environment: [:])
            }
            #expect(error?.problems.contains { $0.contains(expected) } == true, "\(error?.problems ?? [])")
        }
    }

    @Test("issue 28: the event log's rotation, retention and chain settings that cannot work are problems, named")
    func eventLogSegmentProblems() throws {
        var configuration = ReceiverConfiguration()
        configuration.audiences = ["a"]
        configuration.eventLogRotateBytes = 100
        configuration.eventLogRotateInterval = 5
        #expect(configuration.problems.contains("event_log_rotate_bytes must be 0 (off) or at least 4096, got 100"), "\(configuration.problems)")
        #expect(configuration.problems.contains("event_log_rotate_interval must be 0 (off) or at least 60s, got 5.0"), "\(configuration.problems)")
        configuration = ReceiverConfiguration()
        configuration.audiences = ["a"]
        configuration.eventLogRetention = 86_400
        #expect(configuration.problems.contains { $0.hasPrefix("event_log_retention deletes segments risc rotated") }, "\(configuration.problems)")
        configuration.eventLogRotateInterval = 86_400
        configuration.eventLogChain = false
        #expect(configuration.problems.contains { $0.hasPrefix("event_log_chain = false leaves nothing") }, "\(configuration.problems)")
        configuration.eventLogChain = true
        #expect(configuration.problems.isEmpty, "\(configuration.problems)")
        let path = try Self.file("audiences = [\"a\"]\nevent_log_rotate_interval = \"1d\"\nevent_log_rotate_bytes = 209715200\nevent_log_retention = \"400d\"\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let loaded = try ReceiverConfiguration.loadWithOrigins(file: path, flags: [:], environment: [:]).configuration
        #expect(loaded.eventLogRotateInterval == 86_400 && loaded.eventLogRotateBytes == 209_715_200 && loaded.eventLogRetention == 400 * 86_400)
    }

    @Test("issue 29: transmitters are read from the file, each problem named, and --print-config's TOML loads them back")
    func transmitters() throws {
        let path = try Self.file(
            """
            audiences = ["a"]
            [transmitters.okta]
            issuer = "https://example.okta.com"
            audiences = ["https://risc.example.com/okta"]
            algorithms = ["RS256", "ES256"]
            path = "/events/okta"
            authorization_file = "/etc/risc/okta-push"
            [transmitters.okta.actions.session-revoked]
            "" = ["flag_for_review"]
            [transmitters.keycloak]
            dialect = "ssf"
            issuer = "https://sso.example.com/realms/main"
            audiences = "client/stream"

            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let loaded = try ReceiverConfiguration.loadWithOrigins(file: path, flags: [:], environment: [:])
        let okta = try #require(loaded.configuration.transmitters.first { $0.name == "okta" })
        #expect(okta.dialect == .ssf && okta.path == "/events/okta" && okta.authorizationFile == "/etc/risc/okta-push" && okta.algorithms == ["RS256", "ES256"])
        #expect(okta.discovery == "https://example.okta.com/.well-known/ssf-configuration")
        let keycloak = try #require(loaded.configuration.transmitters.first { $0.name == "keycloak" })
        #expect(keycloak.discovery == "https://sso.example.com/.well-known/ssf-configuration/realms/main" && keycloak.audiences == ["client/stream"])
        #expect(loaded.configuration.actionTable.byIssuer["https://example.okta.com"]?[EventType.sessionRevoked.uri]?[""] == [.flagForReview])
        // Each alias names its issuer for the accounts' lookups, Google's top-level ones too.
        let aliased = try Self.file(
            """
            audiences = ["a"]
            issuer_aliases = ["https://google.example/"]
            [transmitters.okta]
            issuer = "https://example.okta.com"
            issuer_aliases = ["https://old.okta.com"]
            audiences = ["b"]
            path = "/events/okta"

            """)
        defer { try? FileManager.default.removeItem(atPath: aliased) }
        let table = try ReceiverConfiguration.load(file: aliased, flags: [:], environment: [:]).appliedTable
        #expect(table.aliasOf == ["https://old.okta.com": "https://example.okta.com", "https://google.example": "https://accounts.google.com"])
        let printed = try Self.file(loaded.configuration.printed(sources: loaded.origins, format: .toml, version: "test"))
        defer { try? FileManager.default.removeItem(atPath: printed) }
        let again = try ReceiverConfiguration.loadWithOrigins(file: printed, flags: [:], environment: [:]).configuration
        #expect(again.effectiveSettings.map(\.value) == loaded.configuration.effectiveSettings.map(\.value))

        func problems(_ text: String) -> [String] {
            guard let path = try? Self.file("audiences = [\"a\"]\n" + text) else { return [] }
            defer { try? FileManager.default.removeItem(atPath: path) }
            do {
                _ = try ReceiverConfiguration.load(file: path, flags: [:], environment: [:])
                return []
            } catch let error as ConfigurationError {
                return error.problems
            } catch {
                return ["\(error)"]
            }
        }
        #expect(problems("[transmitters.x]\naudiences = [\"b\"]\n").contains { $0.hasPrefix("transmitters.x.issuer is required") })
        #expect(problems("[transmitters.x]\nissuer = \"https://i.example\"\n").contains { $0.contains("transmitters.x.audiences") })
        #expect(problems("[transmitters.x]\nissuer = \"http://i.example\"\naudiences = [\"b\"]\n").contains { $0.hasPrefix("transmitters.x.issuer: plain HTTP") })
        #expect(problems("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\ndialect = \"caep\"\n").contains("transmitters.x.dialect must be google or ssf, got 'caep'"))
        #expect(problems("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\nsecret = 1\n").contains { $0.hasPrefix("transmitters.x: unknown setting 'secret'") })
        #expect(problems("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\nalgorithms = [\"HS256\"]\n").contains { $0.contains("HS256") })
        #expect(problems("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\npath = \"events\"\n").contains("transmitters.x.path must start with '/', got 'events'"))
        #expect(problems("[transmitters.google]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\n").contains { $0.hasPrefix("transmitters.google: Google is configured by the top-level") })
        #expect(problems("[transmitters.\"Big Name\"]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\n").contains { $0.contains("a transmitter's name is") })
        let twice = "[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\n[transmitters.y]\nissuer = \"https://i.example/\"\naudiences = [\"c\"]\n"
        #expect(problems(twice).contains { $0.hasSuffix("they cannot be told apart") })
        #expect(problems(twice + "path = \"/events/y\"\n").isEmpty)
        #expect(
            problems("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\n[transmitters.x.actions.session-revoked]\n\"\" = [\"explode\"]\n").contains {
                $0.hasPrefix("transmitters.x.actions.session-revoked")
            })
        // Without Google's audiences, the transmitters alone are a whole configuration.
        let alone = try Self.file("[transmitters.x]\nissuer = \"https://i.example\"\naudiences = [\"b\"]\n")
        defer { try? FileManager.default.removeItem(atPath: alone) }
        #expect(try !ReceiverConfiguration.load(file: alone, flags: [:], environment: [:]).hasGoogle)
    }

    @Test("--print-config's TOML loads back as the same configuration")
    func printedLoadsBack() throws {
        let path = try Self.file("audiences = [\"a\", \"b\"]\nmax_body_bytes = 2048\n[limits]\ndrain_timeout = 7\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let loaded = try ReceiverConfiguration.loadWithOrigins(file: path, flags: [:], environment: [:])
        let printed = try Self.file(loaded.configuration.printed(sources: loaded.origins, format: .toml, version: "test"))
        defer { try? FileManager.default.removeItem(atPath: printed) }
        let again = try ReceiverConfiguration.loadWithOrigins(file: printed, flags: [:], environment: [:]).configuration
        #expect(again.effectiveSettings.map(\.value) == loaded.configuration.effectiveSettings.map(\.value))
    }

    @Test("a reload takes the settings the table marks reloaded, and names the rest as waiting for a restart")
    func reloadChanges() throws {
        let running = ReceiverConfiguration()
        var new = running
        new.maxBodyBytes = 1_234
        new.retention.done = 60
        new.port = 9_443
        new.audiences = ["other"]
        let changes = running.changes(to: new)
        #expect(changes.applied == ["max_body_bytes", "retention.done"])
        #expect(changes.needsRestart == ["audiences", "listen.port"])
        #expect(changes.merged.maxBodyBytes == 1_234 && changes.merged.retention.done == 60)
        #expect(changes.merged.port == running.port && changes.merged.audiences == running.audiences)
        #expect(running.changes(to: running).applied.isEmpty && running.changes(to: running).needsRestart.isEmpty)
        let keys = ReceiverConfiguration.reloadableKeys
        #expect(keys.contains("log.level") && keys.contains("actions.table") && !keys.contains("store.url"))
    }
}

extension ConfigurationLoadingTests {
    @Test("a key's default is written once, in code: no help text names one; the flags' help adds it from the default configuration")
    func defaultsOnce() {
        for setting in ReceiverConfiguration.settings {
            #expect(!setting.help.contains("(default"), "\(setting.key)'s help names a default of its own: \(setting.help)")
        }
        #expect(ReceiverConfiguration.helpWithDefault("max_body_bytes").hasSuffix("(default 65536)"))
        #expect(ReceiverConfiguration.helpWithDefault("retention.done").hasSuffix("(default \"30d\")"))
        #expect(!ReceiverConfiguration.helpWithDefault("webhook.url").contains("(default"))
    }
}
