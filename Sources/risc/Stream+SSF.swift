import ArgumentParser
import Foundation
import RISCClient
import RISCConfig
import RISCCore
import RISCServer
import RISCStorage

/// `risc stream … --transmitter NAME`: the stream of an SSF transmitter the receiver's
/// configuration names (`transmitters.NAME`), through its management API (SSF §8).
///
/// What risc knows of the stream is kept in `DATA_DIR/streams/NAME.json`: its `stream_id` and,
/// once a management answer named another issuer than the transmitter's, why it is no longer used
/// (every later call is refused until `risc stream create` makes a new one).
struct SSFStream {
    let settings: TransmitterSettings
    let client: SSFStreamClient
    let recordPath: String
    let json: Bool

    static func open(_ name: String, store: StoreOption, json: Bool) throws -> SSFStream {
        let configuration = try store.resolved().configuration
        guard let settings = configuration.transmitters.first(where: { $0.name == name }) else {
            let known = configuration.transmitters.map(\.name)
            throw ValidationError(
                "--transmitter \(name): the configuration names no such transmitter (\(known.isEmpty ? "give the receiver's --config" : "known: " + known.joined(separator: ", ")))")
        }
        let authorization: SSFAuthorization
        do {
            guard let given = try settings.managementAuthorization() else {
                throw ValidationError("transmitters.\(name): give client_id with token_endpoint (OAuth client credentials) or management_token_file to manage its stream")
            }
            authorization = given
        } catch let error as TransmitterSettings.FileError {
            throw ValidationError(error.description)
        }
        return SSFStream(
            settings: settings,
            client: SSFStreamClient(
                issuer: settings.issuer, metadataURL: settings.discovery, authorization: authorization, http: CurlHTTPClient(caBundlePath: settings.caFile)),
            recordPath: settings.streamRecordPath(dataDirectory: configuration.dataDirectory), json: json)
    }

    // MARK: The stream record

    var record: JSONObject? {
        FileManager.default.contents(atPath: recordPath).flatMap { try? JSONParser.parseObject(Array($0)) }
    }

    func save(_ record: JSONObject) throws {
        try FileManager.default.createDirectory(atPath: PathText.directory(of: recordPath), withIntermediateDirectories: true)
        try Data(JSONValue.object(record).serialized.utf8).write(to: URL(fileURLWithPath: recordPath), options: .atomic)
    }

    /// The stream risc made, unless it is stopped: else a refusal that says what to do.
    func streamID() throws -> String {
        guard let record, let id = record["stream_id"]?.stringValue else {
            throw ValidationError("no stream of transmitters.\(settings.name) is known here (\(recordPath)): run `risc stream create --transmitter \(settings.name)`")
        }
        if let stopped = record["stopped"]?.stringValue {
            throw ValidationError("stream \(id) of transmitters.\(settings.name) is no longer used: \(stopped). `risc stream create --transmitter \(settings.name)` makes a new one")
        }
        return id
    }

    /// What `create` and `replace` send: the delivery and the events asked for.
    func configuration() throws -> JSONObject {
        var delivery: JSONObject = ["method": .string(settings.delivery == "poll" ? SSFDelivery.poll : SSFDelivery.push)]
        if settings.delivery == "push" {
            guard let url = settings.receiverURL else { throw ValidationError("transmitters.\(settings.name).receiver_url: where the transmitter pushes is needed for a push stream") }
            delivery["endpoint_url"] = .string(url)
            // While the value is rotated the file holds two lines: the stream gets the new one, the last.
            do {
                if let values = try settings.pushCredential(), let newest = values.last { delivery["authorization_header"] = .string(newest) }
            } catch {
                throw ValidationError("\(error)")
            }
        }
        let types = settings.eventsRequested.isEmpty ? EventType.ssfSupported : settings.eventsRequested.compactMap(EventType.init(name:))
        return ["delivery": .object(delivery), "events_requested": .array(types.map { .string($0.uri) }), "description": "risc receiver"]
    }

    /// Runs management calls; an answer naming another issuer stops the stream for good (exit 1),
    /// another refusal exits 1 (3 when temporary).
    func perform<T>(_ body: (SSFStreamClient) async throws -> T) async throws -> T {
        do { return try await body(client) } catch let error as SSFError {
            if error.issuerMismatch, var record {
                record["stopped"] = .string("a management answer named another issuer than \(settings.issuer)")
                try? save(record)
            }
            if json { print(JSONValue.object(["error": .string(error.description), "status": error.status.map { .number(Double($0)) } ?? .null]).serialized) }
            FileHandle.standardError.write(Data("risc: \(error)\n".utf8))
            let temporary = error.status.map { $0 == 429 || $0 >= 500 } ?? !error.issuerMismatch
            throw temporary ? ExitStatus.temporaryFailure : ExitStatus.rejected
        }
    }

    /// Prints a stream configuration, as `risc stream show` does for Google's.
    func show(_ stream: JSONObject) {
        if json { return print(JSONValue.object(stream).serialized) }
        let delivery = stream["delivery"]?.objectValue
        let method = delivery?["method"]?.stringValue
        print("stream:    \(stream["stream_id"]?.stringValue ?? "?") (transmitters.\(settings.name), \(settings.issuer))")
        print("delivery:  \(method == SSFDelivery.poll ? "poll" : method == SSFDelivery.push ? "push" : method ?? "(none)") → \(delivery?["endpoint_url"]?.stringValue ?? "(no url)")")
        print("requested: \(shortNames(stream["events_requested"]?.arrayValue))")
        if let delivered = stream["events_delivered"]?.arrayValue { print("delivered: \(shortNames(delivered))") }
        let wanted = Set((stream["events_requested"]?.arrayValue ?? []).compactMap(\.stringValue))
        let missing = wanted.subtracting((stream["events_delivered"]?.arrayValue ?? []).compactMap(\.stringValue))
        if stream["events_delivered"] != nil, !missing.isEmpty {
            // A pitfall others hit: rules for events the stream never delivers silently never run.
            FileHandle.standardError.write(Data("risc: note: requested but not delivered: \(shortNames(missing.sorted().map { .string($0) }))\n".utf8))
        }
    }
}

extension StreamOptions {
    /// The SSF transmitter's stream when `--transmitter` names one; nil: Google's, as before.
    func ssf(_ store: StoreOption) throws -> SSFStream? {
        try transmitter.map { try SSFStream.open($0, store: store, json: json) }
    }

    /// The SSF stream `--transmitter` names and its id; without one (Google's stream), `refusal`.
    func ssfStream(_ store: StoreOption, elseRefuse refusal: String) throws -> (SSFStream, String) {
        guard let ssf = try ssf(store) else { throw ValidationError(refusal) }
        return (ssf, try ssf.streamID())
    }
}

extension SSFStream {
    /// Sets the stream's status (`enabled`, `paused`, `disabled`) and says so.
    func setStatus(_ id: String, _ status: String, said: String) async throws {
        let answer = try await perform { try await $0.setStatus(streamID: id, status) }
        if json { return print(JSONValue.object(answer).serialized) }
        print(said)
    }
}

extension RiscCommand.Stream {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the stream of an SSF transmitter (POST to its configuration_endpoint) with the delivery and events its settings name.")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            guard let ssf = try options.ssf(store) else { throw ValidationError("Google's stream exists once per project: use `risc stream update --url …`") }
            let configuration = try ssf.configuration()
            let stream = try await ssf.perform { try await $0.create(configuration) }
            guard let id = stream["stream_id"]?.stringValue else { throw ValidationError("the transmitter answered without a stream_id") }
            var record: JSONObject = ["stream_id": .string(id), "issuer": .string(ssf.settings.issuer), "created_at": .string(Timestamp.iso8601(systemNow()))]
            // A poll stream's endpoint, for the receiver's poller (unless poll_url names it).
            if let delivery = stream["delivery"]?.objectValue, delivery["method"]?.stringValue == SSFDelivery.poll { record["poll_url"] = delivery["endpoint_url"] }
            try ssf.save(record)
            ssf.show(stream)
        }
    }

    struct Replace: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Replace an SSF stream's configuration with what its settings name (PUT).")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            let (ssf, id) = try options.ssfStream(store, elseRefuse: "for Google, `risc stream update --url …` replaces the stream")
            let configuration = try ssf.configuration()
            ssf.show(try await ssf.perform { try await $0.replace(streamID: id, configuration) })
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an SSF transmitter's stream (DELETE); risc forgets it.")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            let (ssf, id) = try options.ssfStream(store, elseRefuse: "Google's stream cannot be deleted through its API: `risc stream disable`")
            try await ssf.perform { try await $0.delete(streamID: id) }
            try? FileManager.default.removeItem(atPath: ssf.recordPath)
            if !options.json { print("stream \(id) deleted") }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause an SSF stream: the transmitter holds events until it is enabled again.")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            let (ssf, id) = try options.ssfStream(store, elseRefuse: "Google's streams cannot be paused: `risc stream disable` stops them (events are lost)")
            try await ssf.setStatus(id, "paused", said: "stream \(id) paused")
        }
    }

    struct Subjects: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "subjects", abstract: "Add or remove a subject of an SSF stream (add_subject_endpoint, remove_subject_endpoint).")
        @Argument(help: "add or remove") var verb: String
        @Option(help: "The subject, as JSON: {\"format\":\"email\",\"email\":\"ada@example.com\"}.") var subject: String
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func validate() throws {
            guard ["add", "remove"].contains(verb) else { throw ValidationError("subjects: add or remove") }
            guard (try? JSONParser.parseObject(Array(subject.utf8))) != nil else { throw ValidationError("--subject: a JSON object") }
        }

        func run() async throws {
            let (ssf, id) = try options.ssfStream(store, elseRefuse: "Google's streams have no subjects to manage: give --transmitter")
            let object = try JSONParser.parseObject(Array(subject.utf8))
            try await ssf.perform { try await $0.subject(streamID: id, object, add: verb == "add") }
            if !options.json { print("subject \(verb == "add" ? "added to" : "removed from") stream \(id)") }
        }
    }
}

extension RiscCommand.Stream.Status {
    /// The last `stream-updated` event the transmitter sent, as the receiver stored it (its
    /// `status`, `reason` and when it came), from the 10,000 newest SETs; nil when there is none
    /// or no store of a receiver here.
    func lastStreamUpdate(_ ssf: SSFStream) async throws -> JSONObject? {
        let resolved = try store.resolved()
        guard resolved.store.url != nil || FileManager.default.fileExists(atPath: resolved.embeddedStorePath) else { return nil }
        let opened = try await StoreOption.open(resolved)
        defer { opened.close() }
        let admin = try opened.queue()
        let rows = try await admin.list(state: nil, limit: 10_000).filter { row in
            row.eventTypes.contains { $0.hasSuffix("stream-updated") } && SETPolicy.issuerMatches(row.issuer, ssf.settings.issuer)
        }
        guard let row = rows.max(by: { $0.receivedAt < $1.receivedAt }),
            let token = try await admin.tokens(StoredSETSelection(jti: row.jti, limit: 1)).first?.token,
            let claims = try? SecurityEventToken(payload: try CompactJWS(token).payload),
            let event = claims.events.first(where: { $0.type.canonical == .streamUpdated })
        else { return nil }
        var object: JSONObject = ["jti": .string(row.jti), "received_at": .string(Timestamp.iso8601(row.receivedAt))]
        if let status = event.payload["status"]?.stringValue { object["status"] = .string(status) }
        if let reason = event.reason { object["reason"] = .string(reason) }
        return object
    }
}
