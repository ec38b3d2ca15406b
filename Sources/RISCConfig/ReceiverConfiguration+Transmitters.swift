import RISCClient
import RISCCore
import RISCServer

extension ReceiverConfiguration {
    /// The members a transmitter's table takes.
    static let transmitterMembers: Set<String> = [
        "dialect", "issuer", "issuer_aliases", "audiences", "algorithms", "discovery_url", "jwks_file", "path", "authorization_file", "actions",
        "delivery", "receiver_url", "events_requested", "token_endpoint", "client_id", "client_auth", "client_secret_file", "client_key_file", "ca_file", "scope",
        "management_token_file", "poll_url", "poll_interval",
    ]

    /// `transmitters`: `{"okta": {"issuer": …, "audiences": […], …}}` (in TOML, `[transmitters.okta]`).
    static var transmittersSetting: Setting {
        Setting(
            "transmitters",
            "transmitters beside Google, by name: {\"okta\": {\"dialect\": \"ssf\", \"issuer\": …, \"audiences\": […], \"path\": …, \"authorization_file\": …, \"actions\": {…}}}; SIGHUP applies each one's action rows, the rest waits for a restart; see docs/transmitters.md",
            read: { layers, c in
                guard let table = layers.object("transmitters") else { return }
                for name in table.keys.sorted() {
                    guard let members = table[name]?.objectValue else {
                        layers.report("transmitters.\(name): expected a table of settings")
                        continue
                    }
                    if let transmitter = readTransmitter(name, members, table: &c.actionTable, report: { layers.report($0) }) {
                        c.transmitters.append(transmitter)
                    }
                }
            },
            value: { c in
                var object = JSONObject()
                for transmitter in c.transmitters { object[transmitter.name] = .object(json(transmitter, table: c.actionTable)) }
                return .object(object)
            })
    }

    static func readTransmitter(_ name: String, _ members: JSONObject, table: inout ActionTable, report: (String) -> Void) -> TransmitterSettings? {
        let key = "transmitters.\(name)"
        var transmitter = TransmitterSettings(name: name)
        var fine = true
        for member in members.keys.sorted() where !transmitterMembers.contains(member) {
            report("\(key): unknown setting '\(member)' (one of \(transmitterMembers.sorted().joined(separator: ", ")))")
            fine = false
        }
        func string(_ member: String) -> String? {
            guard let value = members[member], value != .null else { return nil }
            guard let text = value.stringValue else {
                report("\(key).\(member): expected a string")
                fine = false
                return nil
            }
            return text
        }
        func strings(_ member: String) -> [String]? {
            guard let value = members[member], value != .null else { return nil }
            if let text = value.stringValue { return [text] }
            guard let items = value.arrayValue, case let texts = items.compactMap(\.stringValue), texts.count == items.count else {
                report("\(key).\(member): expected a list of strings")
                fine = false
                return nil
            }
            return texts
        }
        if let dialect = string("dialect") {
            if let known = Transmitter.Dialect(rawValue: dialect) {
                transmitter.dialect = known
            } else {
                report("\(key).dialect must be google or ssf, got '\(dialect)'")
                fine = false
            }
        }
        transmitter.issuer = string("issuer") ?? ""
        transmitter.issuerAliases = strings("issuer_aliases") ?? []
        transmitter.audiences = strings("audiences") ?? []
        if let algorithms = strings("algorithms") { transmitter.algorithms = algorithms }
        transmitter.discoveryURL = string("discovery_url")
        transmitter.jwksFile = string("jwks_file")
        transmitter.path = string("path")
        transmitter.authorizationFile = string("authorization_file")
        if let delivery = string("delivery") { transmitter.delivery = delivery }
        transmitter.receiverURL = string("receiver_url")
        transmitter.eventsRequested = strings("events_requested") ?? []
        transmitter.tokenEndpoint = string("token_endpoint")
        transmitter.clientID = string("client_id")
        if let method = string("client_auth") {
            if let known = SSFClientCredentials.Method(rawValue: method) {
                transmitter.clientAuth = known
            } else {
                report("\(key).client_auth must be one of \(SSFClientCredentials.Method.allCases.map(\.rawValue).joined(separator: ", ")), got '\(method)'")
                fine = false
            }
        }
        transmitter.clientSecretFile = string("client_secret_file")
        transmitter.clientKeyFile = string("client_key_file")
        transmitter.caFile = string("ca_file")
        transmitter.scope = string("scope")
        transmitter.managementTokenFile = string("management_token_file")
        transmitter.pollURL = string("poll_url")
        if let value = members["poll_interval"] {
            if let seconds = value.numberValue ?? value.stringValue.flatMap(durationSeconds) {
                transmitter.pollInterval = seconds
            } else {
                report("\(key).poll_interval: expected seconds or a duration such as 10s")
                fine = false
            }
        }
        if let actions = members["actions"] {
            guard let rows = actions.objectValue else {
                report("\(key).actions: expected an object of event type → {reason → [actions]}")
                return nil
            }
            let issuers = ([transmitter.issuer] + transmitter.issuerAliases).filter { !$0.isEmpty }
            readActionRows(rows, key: "\(key).actions", into: &table, issuers: issuers, report: report)
        }
        return fine ? transmitter : nil
    }

    /// Rows of an action table (`actions.table`, or a transmitter's `actions`) onto `table`, each
    /// bad one reported: `{"account-disabled": {"hijacking": ["end_sessions", …], "": […]}}`.
    static func readActionRows(_ rows: JSONObject, key: String, into table: inout ActionTable, issuers: [String] = [], report: (String) -> Void) {
        for (typeName, byReason) in rows {
            guard let type = EventType(name: typeName) else {
                report("\(key): unknown event type '\(typeName)'")
                continue
            }
            guard let reasons = byReason.objectValue else {
                report("\(key).\(typeName): expected an object of reason → [actions]")
                continue
            }
            for (reason, list) in reasons {
                // Google's (and RISC 1.0's) two reasons: a misspelt one would be a row no SET matches,
                // leaving the row it meant to change as it was. "" covers any other, a future one too.
                if type.canonical == .accountDisabled, !["", "default", "hijacking", "bulk-account"].contains(reason) {
                    report(
                        "\(key).\(typeName).\(reason): Google's account-disabled reasons are hijacking and bulk-account (\"\" for any other)")
                    continue
                }
                let names = list.arrayValue?.compactMap(\.stringValue) ?? []
                let actions = names.compactMap(Action.init(rawValue:))
                guard list.arrayValue?.count == names.count, actions.count == names.count, !actions.isEmpty else {
                    report(
                        "\(key).\(typeName).\(reason.isEmpty ? "\"\"" : reason): expected a non-empty list of: \(Action.allCases.map(\.rawValue).joined(separator: ", "))")
                    continue
                }
                table.set(type, reason: reason == "default" ? "" : reason, actions: actions, issuers: issuers)
            }
        }
    }

    /// One transmitter as `--print-config` shows it (files by path, never their contents).
    static func json(_ transmitter: TransmitterSettings, table: ActionTable) -> JSONObject {
        var object: JSONObject = [
            "dialect": .string(transmitter.dialect.rawValue), "issuer": .string(transmitter.issuer), "audiences": .strings(transmitter.audiences),
            "algorithms": .strings(transmitter.algorithms),
        ]
        // What is not set is left out (TOML has no null).
        if let path = transmitter.path { object["path"] = .string(path) }
        if let file = transmitter.authorizationFile { object["authorization_file"] = .string(file) }
        if transmitter.delivery != "push" { object["delivery"] = .string(transmitter.delivery) }
        if !transmitter.eventsRequested.isEmpty { object["events_requested"] = .strings(transmitter.eventsRequested) }
        for (member, value) in [
            ("receiver_url", transmitter.receiverURL.map(Redaction.url)), ("token_endpoint", transmitter.tokenEndpoint.map(Redaction.url)),
            ("client_id", transmitter.clientID), ("client_secret_file", transmitter.clientSecretFile), ("client_key_file", transmitter.clientKeyFile), ("ca_file", transmitter.caFile),
            ("scope", transmitter.scope), ("management_token_file", transmitter.managementTokenFile), ("poll_url", transmitter.pollURL.map(Redaction.url)),
        ] {
            if let value { object[member] = .string(value) }
        }
        if transmitter.clientID != nil { object["client_auth"] = .string(transmitter.clientAuth.rawValue) }
        if transmitter.delivery == "poll" { object["poll_interval"] = .number(transmitter.pollInterval) }
        if !transmitter.issuerAliases.isEmpty { object["issuer_aliases"] = .strings(transmitter.issuerAliases) }
        if let file = transmitter.jwksFile { object["jwks_file"] = .string(file) } else { object["discovery_url"] = .string(Redaction.url(transmitter.discovery)) }
        if let rows = table.byIssuer[SETPolicy.issuerScope(transmitter.issuer)] { object["actions"] = .object(json(rows: rows)) }
        return object
    }
}
