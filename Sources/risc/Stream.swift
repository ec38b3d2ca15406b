import ArgumentParser
import Foundation
import RISCClient
import RISCCore
import RISCServer

extension RiscCommand {
    struct Stream: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register and test the endpoint with Google's RISC API.",
            discussion: """
                Authenticates as a service account with the role RISC Configuration Admin \
                (roles/riscconfigs.admin), from its JSON key file (--credentials, or GOOGLE_APPLICATION_CREDENTIALS): \
                each call carries a fresh RS256 JWT signed with that key, which is read and never copied or logged. \
                Exit status: 0 done; 1 Google refused the request (its message and the fix are printed) or \
                `verify --wait` timed out; 3 the API could not be reached or failed on its side; 64 usage.
                """,
            subcommands: [Show.self, Update.self, Status.self, Enable.self, Disable.self, Verify.self, Create.self, Replace.self, Delete.self, Pause.self, Subjects.self]
        )
    }
}

struct StreamOptions: ParsableArguments {
    @Option(help: "The service account's JSON key file (default: $GOOGLE_APPLICATION_CREDENTIALS).", transform: OptionRange.path) var credentials: String?
    @Option(help: "The RISC API's origin (for testing).") var apiBase: String = RISCManagementClient.defaultBase
    @Flag(help: "Print JSON.") var json = false
    @Option(help: "An SSF transmitter the receiver's configuration names (transmitters.NAME, with --config): its stream instead of Google's.")
    var transmitter: String?

    func validate() throws {
        if let refusal = URLPolicy().refusal(for: apiBase) { throw ValidationError("--api-base: \(refusal)") }
    }

    func client() throws -> RISCManagementClient {
        guard let path = credentials ?? ProcessInfo.processInfo.environment["GOOGLE_APPLICATION_CREDENTIALS"] else {
            throw ValidationError("give --credentials FILE (the service account's JSON key) or set GOOGLE_APPLICATION_CREDENTIALS")
        }
        do { return RISCManagementClient(account: try ServiceAccount(keyFile: path), base: apiBase) } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Runs API calls; a refusal prints Google's message with the fix and exits 1 (3 when temporary).
    func perform<T>(_ body: (RISCManagementClient) async throws -> T) async throws -> T {
        let client = try client()
        do { return try await body(client) } catch let error as RISCAPIError {
            if json {
                var object = JSONObject()
                object["error"] = .string(error.message)
                object["status"] = error.status.map { .number(Double($0)) } ?? .null
                if let advice = error.advice { object["advice"] = .string(advice) }
                print(JSONValue.object(object).serialized)
            }
            FileHandle.standardError.write(Data("risc: \(error)\n".utf8))
            throw error.isTemporary ? ExitStatus.temporaryFailure : ExitStatus.rejected
        }
    }

    func printJSON(_ object: JSONObject) { print(JSONValue.object(object).serialized) }
}

/// Event type URIs as short names where risc knows them.
func shortNames(_ values: [JSONValue]?) -> String {
    let names = (values ?? []).compactMap(\.stringValue).map { EventType(name: $0)?.shortName ?? $0 }
    return names.isEmpty ? "(none)" : names.joined(separator: ", ")
}

extension RiscCommand.Stream {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the stream configuration (GET /v1beta/stream; an SSF transmitter's: GET configuration_endpoint).")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            if let ssf = try options.ssf(store) {
                let id = try ssf.streamID()
                return ssf.show(try await ssf.perform { try await $0.read(streamID: id) })
            }
            let stream = try await options.perform { try await $0.stream() }
            if options.json { return options.printJSON(stream) }
            let delivery = stream["delivery"]?.objectValue
            let method = delivery?["delivery_method"]?.stringValue
            print("delivery:  \(method == RISCManagementClient.pushDeliveryMethod ? "push" : method ?? "(none)") → \(delivery?["url"]?.stringValue ?? "(no url)")")
            print("requested: \(shortNames(stream["events_requested"]?.arrayValue))")
            if let delivered = stream["events_delivered"]?.arrayValue { print("delivered: \(shortNames(delivered))") }
            if let supported = stream["events_supported"]?.arrayValue { print("supported: \(shortNames(supported))") }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or replace the stream: where Google pushes and which events (POST /v1beta/stream:update).")
        @Option(help: "The receiver's public URL, https://HOST/events (its domain must be one of the project's authorized domains); Google's only.")
        var url: String?
        @Option(
            name: .customLong("events"), parsing: .upToNextOption,
            help: "Event types, short names or URIs, space- or comma-separated (default: all seven Google sends).")
        var events: [String] = []
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func eventTypes() throws -> [EventType] {
            let names = events.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            if names.isEmpty { return EventType.google }
            return try names.map { name in
                guard let type = EventType(name: name) else {
                    throw ValidationError("--events: unknown type '\(name)' (known: \(EventType.google.map(\.shortName).joined(separator: ", ")), or a full URI)")
                }
                return type
            }
        }

        func validate() throws {
            if options.transmitter == nil {
                guard let url else { throw ValidationError("give --url, the receiver's public https:// URL (https://HOST/events)") }
                guard URLPolicy.components(url)?.scheme == "https" else { throw ValidationError("--url must be an absolute https:// URL") }
                if let refusal = URLPolicy().refusal(for: url) { throw ValidationError("--url: \(refusal)") }
            }
            _ = try eventTypes()
        }

        func run() async throws {
            if let ssf = try options.ssf(store) {
                // PATCH: only the events asked for change (the settings' list, or --events).
                let id = try ssf.streamID()
                var changes = try ssf.configuration()
                if !events.isEmpty { changes["events_requested"] = .array(try eventTypes().map { .string($0.uri) }) }
                let requested = changes["events_requested"]!
                return ssf.show(try await ssf.perform { try await $0.update(streamID: id, ["events_requested": requested]) })
            }
            let url = self.url ?? ""
            let types = try eventTypes()
            // Google pushes to the URL's path; the receiver answers 404 on any path but its own.
            let eventsPath = (try? store.resolved().configuration.eventsPath) ?? ReceiverConfiguration().eventsPath
            let path = URLComponents(string: url)?.percentEncodedPath ?? ""
            if path != eventsPath {
                FileHandle.standardError.write(
                    Data(
                        "risc: note: Google will push to \(path.isEmpty ? "/" : path), but the receiver serves events at \(eventsPath) (events_path): unless a proxy maps one to the other, every push gets 404\n"
                            .utf8))
            }
            let answer = try await options.perform { try await $0.updateStream(url: url, events: types) }
            if options.json { return options.printJSON(answer) }
            print("stream updated: push → \(url)")
            print("requested: \(types.map(\.shortName).joined(separator: ", "))")
            if !types.contains(.verification) {
                FileHandle.standardError.write(Data("risc: note: without verification events `risc stream verify` cannot work\n".utf8))
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show whether the stream is enabled (GET /v1beta/stream/status); an SSF transmitter's also with the last stream-updated event it sent.")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            if let ssf = try options.ssf(store) {
                let id = try ssf.streamID()
                var status = try await ssf.perform { try await $0.status(streamID: id) }
                if let updated = try await lastStreamUpdate(ssf) { status["last_stream_updated"] = .object(updated) }
                if options.json { return options.printJSON(status) }
                print(status["status"]?.stringValue ?? "(no status)")
                if let updated = status["last_stream_updated"]?.objectValue {
                    let reason = updated["reason"]?.stringValue.map { " (\($0))" } ?? ""
                    print("last stream-updated: \(updated["status"]?.stringValue ?? "?")\(reason), received \(updated["received_at"]?.stringValue ?? "?")")
                }
                return
            }
            let status = try await options.perform { try await $0.status() }
            if options.json { return options.printJSON(status) }
            print(status["status"]?.stringValue ?? "(no status)")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume delivery (POST /v1beta/stream/status:update; an SSF transmitter's: status enabled).")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            if let ssf = try options.ssf(store) {
                let id = try ssf.streamID()
                return try await ssf.setStatus(id, "enabled", said: "stream \(id) enabled")
            }
            let answer = try await options.perform { try await $0.setStatus(enabled: true) }
            if options.json { return options.printJSON(answer) }
            print("stream enabled")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop delivery (POST /v1beta/stream/status:update). Google neither sends nor keeps events while disabled; nor does an SSF transmitter.")
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func run() async throws {
            if let ssf = try options.ssf(store) {
                let id = try ssf.streamID()
                return try await ssf.setStatus(
                    id, "disabled", said: "stream \(id) disabled: events that happen now are dropped by the transmitter (risc stream enable resumes; pause holds them instead)")
            }
            let answer = try await options.perform { try await $0.setStatus(enabled: false) }
            if options.json { return options.printJSON(answer) }
            print("stream disabled: events that happen now are lost, not queued (risc stream enable resumes)")
        }
    }
}
