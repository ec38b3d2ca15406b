import ArgumentParser
import Foundation
import RISCClient
import RISCConfig
import RISCCore
import RISCServer
import RISCStorage

extension RiscCommand.Stream {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask Google for a verification event and, with --wait, watch the receiver get it.",
            discussion: """
                Sends stream:verify with a fresh random state and records that state in the receiver's store \
                (the embedded one in --data-dir when it exists, or the shared one of --store-url or --config). When the receiver gets the verification SET carrying it, it logs \
                `step: verification, outcome: matched`. With --wait the command watches for that and prints the \
                round-trip time and what was checked (key id and algorithm, issuer, audience), or, on timeout, \
                the likely causes. --wait needs the receiver's store: its data directory on this machine, or its \
                PostgreSQL store.
                """
        )

        @Option(help: "The state to send (default: a fresh random one).") var state: String?
        @Option(help: "Wait this long for the SET to reach the receiver (e.g. 30s, 2m; 0: do not wait).") var wait: String = "0"
        @OptionGroup var store: StoreOption
        @OptionGroup var options: StreamOptions

        func validate() throws {
            if let problem = durationProblem(wait) { throw ValidationError("--wait: \(problem)") }
        }

        func run() async throws {
            let waitSeconds = durationSeconds(wait)!
            let resolved = try store.resolved()
            let storePath = resolved.embeddedStorePath
            // Never a new embedded store: only one a receiver made, or the shared one.
            let haveStore = resolved.store.url != nil || FileManager.default.fileExists(atPath: storePath)
            if waitSeconds > 0 && !haveStore {
                throw ValidationError(
                    "--wait watches the store of a `risc serve`, and there is none at \(storePath): give its --data-dir, --store-url or --config")
            }
            let opened = haveStore ? try await StoreOption.open(resolved) : nil
            defer { opened?.close() }
            let ledger = try opened?.verifications()
            let state = self.state ?? "risc-verify-\(Timestamp.iso8601(systemNow()))-\(UInt64.random(in: 0...UInt64.max) & 0xFFFF_FFFF_FFFF)"
            let requestedAt = systemNow()
            // Recorded before the call: the SET may arrive before Google's answer does.
            if let ssf = try options.ssf(store) {
                // SSF: the receiver refuses (invalid_state) a state it has no record of, so the record comes first.
                guard let ledger else {
                    throw ValidationError(
                        "an SSF transmitter's verification needs the receiver's store (its --data-dir, --store-url or --config): without the state recorded there the receiver refuses it")
                }
                let id = try ssf.streamID()
                try await ledger.request(state: state, apiBase: ssf.settings.issuer, now: requestedAt)
                try await ssf.perform { try await $0.requestVerification(streamID: id, state: state) }
            } else {
                try await ledger?.request(state: state, apiBase: options.apiBase, now: requestedAt)
                _ = try await options.perform { try await $0.verify(state: state) }
            }
            if !options.json {
                print("verification requested, state \(state)")
                if ledger == nil { print("(no store at \(storePath): look for the state in the receiver's event log)") }
            }
            guard waitSeconds > 0, let ledger else {
                if options.json { options.printJSON(["state": .string(state), "requested": true]) }
                return
            }
            let deadline = requestedAt + waitSeconds
            while systemNow() < deadline {
                if let entry = try await ledger.entry(state: state), let matched = entry.matchedAt {
                    report(entry, roundTrip: matched - entry.requestedAt)
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            let causes = await diagnose(requestedAt: requestedAt, ledger: ledger, resolved: resolved)
            if options.json {
                options.printJSON(["state": .string(state), "matched": false, "waited_s": .number(waitSeconds), "likely_causes": .strings(causes)])
            } else {
                print("no verification SET with this state reached the receiver within \(wait). Likely causes:")
                for cause in causes { print("  - " + cause) }
            }
            throw ExitStatus.rejected
        }

        func report(_ entry: VerificationEntry, roundTrip: Double) {
            if options.json {
                var object = JSONObject()
                object["state"] = .string(entry.state)
                object["matched"] = true
                object["round_trip_ms"] = .number((roundTrip * 1000).rounded())
                object["jti"] = entry.tokenID.map { .string($0) } ?? .null
                object["kid"] = entry.keyID.map { .string($0) } ?? .null
                object["alg"] = entry.algorithm.map { .string($0) } ?? .null
                object["iss"] = entry.issuer.map { .string($0) } ?? .null
                object["aud"] = entry.audience.map { .string($0) } ?? .null
                return options.printJSON(object)
            }
            print(String(format: "verification SET received after %.2f s: the path from Google to this receiver works", roundTrip))
            print("  jti        \(entry.tokenID ?? "-")")
            print("  signature  \(entry.algorithm ?? "-") with kid \(entry.keyID ?? "-"), verified against the issuer's key set")
            print("  issuer     \(entry.issuer ?? "-") (accepted)")
            print("  audience   \(entry.audience ?? "-") (one of ours)")
            print("  state      matches the request")
        }

        /// What could have kept the SET away, from the stream's configuration, its status, the store
        /// and the event log since the request.
        func diagnose(requestedAt: Double, ledger: any VerificationRequests, resolved: StoreOption.Resolved) async -> [String] {
            var causes: [String] = []
            var pushesTo: String?
            let client = try? options.client()
            if let stream = try? await client?.stream() {
                let requested = stream["events_requested"]?.arrayValue?.compactMap(\.stringValue) ?? []
                if !requested.contains(EventType.verification.uri) {
                    causes.append("the stream does not request verification events: run `risc stream update --url …` (it requests all seven types by default)")
                }
                pushesTo = stream["delivery"]?.objectValue?["url"]?.stringValue
            } else {
                causes.append("the stream's configuration could not be read (see `risc stream show`)")
            }
            if let status = try? await client?.status(), status["status"]?.stringValue == "disabled" {
                causes.insert("the stream is disabled: run `risc stream enable`", at: 0)
            }
            if let received = try? await ledger.received(since: requestedAt) {
                if received.all == 0 {
                    causes.append(
                        "no SET at all reached the receiver\(resolved.store.url == nil ? " using " + resolved.dataDirectory : "s sharing this store") since the request: is `risc serve` running with this store, does the URL's name resolve to it, is its TLS certificate valid for that name with the full chain, and does no firewall or proxy block Google? Google retries for a while, so it may still come"
                    )
                } else if received.verifications == 0 {
                    causes.append("\(received.all) SET(s) arrived since the request, none of them a verification event")
                }
            }
            causes += logCauses(since: requestedAt, dataDirectory: resolved.dataDirectory)
            if let pushesTo { causes.append("Google pushes to \(pushesTo): check it is this receiver's public events URL") }
            return causes
        }

        /// Refusals and failures the receiver logged since the request, with what they point to.
        func logCauses(since time: Double, dataDirectory: String) -> [String] {
            let path = (dataDirectory as NSString).appendingPathComponent("events.log")
            guard let data = FileManager.default.contents(atPath: path) else { return [] }
            let since = Timestamp.iso8601(time)
            var refused: [String: Int] = [:]
            var failed = 0, otherStates = 0
            for line in data.split(separator: UInt8(ascii: "\n")) {
                guard let record = try? JSONParser.parseObject(Array(line)), let ts = record["ts"]?.stringValue, ts >= since else { continue }
                switch (record["step"]?.stringValue, record["outcome"]?.stringValue) {
                case ("received", "rejected"): refused[record["err"]?.stringValue ?? "?", default: 0] += 1
                case ("received", "failed"): failed += 1
                case ("verification", "unrequested"): otherStates += 1
                default: break
                }
            }
            var causes: [String] = []
            for (code, count) in refused.sorted(by: { $0.key < $1.key }) {
                let hint =
                    switch code {
                    case "invalid_audience": "add every OAuth client ID of the Google project to `audiences`"
                    case "invalid_issuer": "check `issuer` (and `issuer_aliases`) against the discovery document's"
                    case "invalid_key", "authentication_failed": "check that `discovery_url` (or `jwks_file`) gives the issuer's real keys"
                    default: "see `risc tail --outcome rejected`"
                    }
                causes.append("the receiver refused \(count) SET(s) with \(code) since the request: \(hint)")
            }
            if failed > 0 {
                causes.append("the receiver answered 503 \(failed) time(s) (no usable key set, or the store cannot write): check /readyz on the admin port")
            }
            if otherStates > 0 {
                causes.append("\(otherStates) verification SET(s) arrived with a state this command did not send (an older request, or another tool's)")
            }
            return causes
        }
    }
}
