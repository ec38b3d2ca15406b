import ArgumentParser
import Foundation
import Logging
import RISCClient
import RISCConfig
import RISCCore
import RISCLocal
import RISCServer
import RISCStorage
import RISCTestKit

extension RiscCommand {
    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-send SETs to a receiver, or show what they would do (--dry-run).",
            discussion: """
                SOURCE is a file of compact SETs (one per line; a line starting with # is a comment), a JSON-lines \
                file of event descriptions to sign \
                with a test key ({"type", "subject"?, "reason"?, "state"?, "jti"?, "iat"?, "token_file"?, "token_alg"?}; no other \
                member), or, with \
                --from-store, the receiver's own stored SETs (--jti; --since and --until as a time ago such as 2h or an \
                RFC 3339 time such as 2026-11-23T01:00:00Z; --dead). A file is read a chunk at a time, whatever its size: \
                checked whole first (a bad description, named by its line, stops the replay before anything is sent), \
                then a page of 1,000 SETs at a time; standard input is held, at most 256 MiB. Exit status 0 when \
                every SET got 202 (or, with --dry-run, verified; with --local, was applied), 1 otherwise.
                --local pushes them through the pipeline without HTTP, into --data-dir: stored SETs are put back \
                in the queue with what was applied for them forgotten; SETs from SOURCE are verified (against \
                --jwks-file, the config's jwks_file, or the JWKS of --keys) and stored as if received. Then the \
                action worker runs in this process until nothing is due, and each SET's outcome is printed. With \
                --config, the receiver's action table, retry policy and webhook sink apply.
                """
        )

        @Argument(help: "File of compact SETs or JSON-lines descriptions; - for standard input. Omit with --from-store.", transform: OptionRange.path)
        var source: String?
        @Option(help: "Receiver URL to POST to, e.g. http://127.0.0.1:8443/events.") var to: String?
        @Option(help: "PEM CA bundle (or the certificate itself) that verifies an https --to receiver (default: the system's CAs).", transform: OptionRange.path)
        var caFile: String?
        @Flag(help: "Read the stored SETs of --data-dir instead of SOURCE.") var fromStore = false
        @Option(help: "Data directory for --from-store and --local (default: the config's, else ./data).") var dataDir: String?
        @Option(help: "A shared PostgreSQL store for --from-store and --local (default: the config's store.url, else the embedded store).")
        var storeURL: String?
        @Option(help: "The token-fingerprint key file (accounts.token_key_file), for --local on a shared store.", transform: OptionRange.path) var tokenKeyFile: String?
        @Flag(help: "Re-drive through the pipeline in this process, without HTTP (see above).") var local = false
        @Option(help: "The receiver's config file: the store of --from-store and --local; with --local also its action table, retry policy and webhook; with --dry-run its action table and jwks_file.")
        var config: String?
        @OptionGroup var creation: CreateOption
        @Option(help: "Only the stored SET with this jti.") var jti: String?
        @Option(help: "Only stored SETs received since then: a time ago (90s, 30m, 2h, 1d) or an RFC 3339 time.") var since: String?
        @Option(help: "Only stored SETs received until then (same forms as --since).") var until: String?
        @Flag(help: "Only dead letters.") var dead = false
        @Option(parsing: .unconditional, help: "Requests in flight at once.") var concurrency: Int = 4
        @Option(parsing: .unconditional, help: "At most this many requests per second (0: unlimited).") var rate: Double = 0
        @Option(help: "Key directory for signing descriptions.", transform: OptionRange.path) var keys: String = "keys/test"
        @Option(help: "Issuer for signed descriptions.") var iss: String = SETFactory.defaultIssuer
        @Option(help: "Audience for signed descriptions.") var aud: String = SETFactory.defaultAudience
        @Flag(help: "Verify locally (--jwks-file, else the config's jwks_file, else for descriptions the JWKS of --keys) and print the planned actions; send nothing.") var dryRun = false
        @Option(help: "JWK Set for --dry-run verification.", transform: OptionRange.path) var jwksFile: String?
        @Option(name: .customLong("audience"), help: "Accepted audiences for --dry-run (default: --aud).") var audiences: [String] = []

        /// Seconds since the epoch for "90s" / "2h" (that long ago) or an RFC 3339 time.
        static func instant(_ text: String?, _ option: String, now: Double = systemNow()) throws -> Double? {
            guard let text else { return nil }
            if let ago = durationSeconds(text) { return now - ago }
            if unboundedDurationSeconds(text) != nil, let problem = durationProblem(text) { throw ValidationError("\(option): \(problem)") }
            if let time = Timestamp.parse(text) { return time }
            let day = text.prefix(10).split(separator: "-", omittingEmptySubsequences: false).compactMap { Int($0) }
            if day.count == 3, (1...12).contains(day[1]), Timestamp.parse(text.prefix(10) + "T00:00:00Z") == nil {
                throw ValidationError("\(option): \(Printable.safe(String(text.prefix(10)), maxBytes: 20)) is no day of the calendar")
            }
            throw ValidationError("\(option): a time ago (90s, 30m, 2h, 1d) or an RFC 3339 time (2026-11-23T01:00:00Z), got '\(text)'")
        }

        func validate() throws {
            let now = systemNow()
            let (start, end) = (try Self.instant(since, "--since", now: now), try Self.instant(until, "--until", now: now))
            if let start, let end, start > end {
                throw ValidationError("--since is after --until (\(Timestamp.iso8601(start)) > \(Timestamp.iso8601(end))): no SET was received in between")
            }
            if fromStore == (source != nil) { throw ValidationError("give a SOURCE file, or --from-store") }
            if local && (to != nil || dryRun) { throw ValidationError("--local replaces --to and --dry-run") }
            if !dryRun && !local && to == nil { throw ValidationError("give --to URL (or --dry-run, or --local)") }
            if let to, !Self.isReceiverURL(to) {
                throw ValidationError("--to must be an http:// or https:// URL such as http://127.0.0.1:8443/events, got '\(Printable.safe(to, maxBytes: 200))'")
            }
            if config != nil && !local && !fromStore && !dryRun { throw ValidationError("--config goes with --local, --from-store or --dry-run") }
            if let caFile {
                guard to != nil else { throw ValidationError("--ca-file goes with --to") }
                do { _ = try FileContents.read(caFile, limit: 16 << 20) } catch { throw ValidationError("--ca-file: \(error)") }
            }
            try OptionRange.atLeast(1, concurrency, "--concurrency")
            try OptionRange.within(0.001...1_000_000, rate, "--rate", orZero: true)
        }

        /// An http or https URL with a host: what a receiver's push endpoint can be.
        static func isReceiverURL(_ text: String) -> Bool {
            guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host else { return false }
            return ["http", "https"].contains(scheme) && !host.isEmpty
        }

        func run() async throws {
            if local {
                try await runLocal()
                return
            }
            if fromStore {
                try await runFromStore()
                return
            }
            if dryRun {
                var plan: ((String) async throws -> Bool)?
                var failures = 0
                try await sourcePages { page in
                    if plan == nil { plan = try dryRunPlanner(signedHere: page.signed) }
                    for token in page.tokens where !(try await plan!(token)) { failures += 1 }
                }
                if failures > 0 { throw ExitStatus.rejected }
                return
            }
            var progress: Progress?
            try await sourcePages { page in
                if progress == nil { progress = Progress(client: CurlHTTPClient(caBundlePath: caFile), total: page.total) }
                try await send(page.tokens, to: to!, progress: progress!)
            }
            let summary = progress!.finish()
            print(summary.table)
            if summary.failures > 0 { throw ExitStatus.rejected }
        }

        /// The stored SETs `--jti`, `--since`, `--until` and `--dead` choose.
        func selection() throws -> StoredSETSelection {
            StoredSETSelection(jti: jti, since: try Self.instant(since, "--since"), until: try Self.instant(until, "--until"), deadOnly: dead)
        }

        /// The store of `--from-store` and `--local`, found as every command finds it.
        func storeSettings() throws -> StoreOption.Resolved {
            try StoreOption.resolve(config: config, dataDir: dataDir, storeURL: storeURL, tokenKeyFile: tokenKeyFile)
        }

        /// `--from-store` without `--local`: the stored SETs the selection chooses, a page of 1,000
        /// at a time (a million of them with the memory of a page), sent or planned in order.
        func runFromStore() async throws {
            let store = try await StoreOption.open(storeSettings())
            defer { store.close() }
            let queue = try store.queue()
            let chosen = try selection()
            let total = isatty(STDERR_FILENO) == 1 && !dryRun ? try await queue.ids(chosen).count : 0  // for the progress bar
            let plan = dryRun ? try dryRunPlanner(signedHere: false) : nil
            let progress = Progress(client: CurlHTTPClient(caBundlePath: caFile), total: total)
            var page = chosen
            var (sent, skipped, failures) = (0, 0, 0)
            while true {
                let stored = try await queue.tokens(page)
                guard let last = stored.last else { break }
                page.after = last.id
                // Records risc made itself (revocation-endpoint calls) are no issuer's SETs: a
                // receiver refuses them. `--local` re-drives them.
                let sendable = stored.map(\.token).filter { (try? CompactJWS($0).header.keyID) != LocalSET.keyID }
                skipped += stored.count - sendable.count
                sent += sendable.count
                if let plan {
                    for token in sendable where !(try await plan(token)) { failures += 1 }
                } else {
                    try await send(sendable, to: to!, progress: progress)
                }
            }
            if skipped > 0 {
                FileHandle.standardError.write(Data("skipped \(skipped) local record(s) (revocation-endpoint calls); re-drive them with --local\n".utf8))
            }
            guard sent > 0 else { throw ValidationError("no SETs to replay") }
            if plan == nil {
                let summary = progress.finish()
                print(summary.table)
                failures = summary.failures
            }
            if failures > 0 { throw ExitStatus.rejected }
        }

        /// A page of SOURCE's SETs: at most 1,000, whether they were signed here from descriptions
        /// (`--keys`), and how many SOURCE holds in all.
        struct SourcePage {
            let tokens: [String]
            let signed: Bool
            let total: Int
        }

        /// SOURCE's SETs, a page of 1,000 at a time, in order. Its lines are taken with the white
        /// space around them trimmed; blank lines and `#` comments (no compact JWS or JSON object
        /// starts so) are left out; a first line that is a JSON object makes every line an event
        /// description, signed with `--keys`. A file is read a chunk at a time, twice: first checked
        /// whole, so nothing is sent or planned when a description is bad (named by its line in the
        /// file), then paged, each description signed as its page comes. Standard input is held.
        func sourcePages(_ each: (SourcePage) async throws -> Void) async throws {
            let input = try InputLines(source!, command: "replay", longest: 16 << 20)
            func text(_ bytes: ArraySlice<UInt8>) -> String? {
                let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                return line.isEmpty || line.hasPrefix("#") ? nil : line
            }
            var factory: SETFactory?
            func described(_ line: String, _ number: Int, sign: Bool) throws -> String {
                do { return try Self.sign(description: JSONParser.parseObject(Array(line.utf8)), factory: factory!, checkOnly: !sign) } catch {
                    throw ValidationError("\(source!):\(number): \(error)")
                }
            }
            var total = 0
            var signed: Bool?
            try await input.forEach { number, bytes in
                guard let line = text(bytes) else { return }
                total += 1
                if signed == nil {
                    signed = line.hasPrefix("{")
                    if signed == true { factory = try signingFactory() }
                }
                // The first line decides; a line of the other kind is two files run together.
                if signed == true, !line.hasPrefix("{") {
                    let what = line.split(separator: ".", omittingEmptySubsequences: false).count == 3 ? "a compact SET" : "not a JSON object"
                    throw ValidationError("\(source!):\(number): \(what) in a file of event descriptions (its first line is one): one kind a file")
                } else if signed == false, line.hasPrefix("{") {
                    throw ValidationError("\(source!):\(number): an event description in a file of compact SETs (its first line is one): one kind a file")
                }
                if signed == true { _ = try described(line, number, sign: false) }
            }
            guard let signed else { throw ValidationError("no SETs to replay") }
            var page: [String] = [], read = 0
            try await input.forEach { number, bytes in
                guard let line = text(bytes) else { return }
                page.append(signed ? try described(line, number, sign: true) : line)
                read += 1
                guard page.count == 1_000 else { return }
                try await each(SourcePage(tokens: page, signed: signed, total: total))
                page = []
            }
            if !page.isEmpty { try await each(SourcePage(tokens: page, signed: signed, total: total)) }
            guard read == total else { throw ValidationError("\(source!) changed while it was replayed: \(read) SETs read of the \(total) checked") }
        }

        /// What signs descriptions: the first RS256 key of `--keys` (else its first key).
        func signingFactory() throws -> SETFactory {
            let directory: KeyDirectory
            do { directory = try KeyDirectory(url: URL(fileURLWithPath: keys)) } catch { throw ValidationError("--keys \(keys): \(error)") }
            guard let entry = directory.entries.first(where: { $0.algorithm == .rs256 }) ?? directory.entries.first else {
                throw ValidationError("no key in \(keys)")
            }
            return SETFactory(issuer: iss, audience: aud, signer: entry.signer)
        }

        /// The members an event description may have.
        static let descriptionMembers: Set<String> = ["type", "subject", "reason", "state", "jti", "iat", "token_file", "token_alg"]

        /// The SET a description makes, signed; with `checkOnly`, only checked ("" when it is good).
        static func sign(description: JSONObject, factory: SETFactory, checkOnly: Bool = false) throws -> String {
            // A misspelt member ("subjct") must not sign the event for the default subject.
            if let unknown = description.keys.filter({ !descriptionMembers.contains($0) }).sorted().first {
                throw ValidationError(
                    "unknown member '\(Printable.safe(unknown, maxBytes: 64))' (known: \(descriptionMembers.sorted().joined(separator: ", ")))")
            }
            guard let name = description["type"]?.stringValue, let type = EventType(name: name) else {
                throw ValidationError("needs a known 'type'")
            }
            var subject: JSONValue? = factory.accountSubject(description["subject"]?.stringValue ?? "7375626A656374")
            if type.canonical == .tokenRevoked {
                guard let file = description["token_file"]?.stringValue else { throw ValidationError("token-revoked needs 'token_file'") }
                subject = SETFactory.tokenSubject(
                    refreshToken: try readToken(file, what: "token_file"),
                    algorithm: description["token_alg"]?.stringValue == "prefix" ? .prefix : .hashSHA512SHA512)
            } else if type.canonical == .verification {
                subject = nil
            }
            var extra = JSONObject()
            if let reason = description["reason"]?.stringValue { extra["reason"] = .string(reason) }
            if let state = description["state"]?.stringValue { extra["state"] = .string(state) }
            var iat: Double?
            if let given = description["iat"] {
                guard let seconds = given.numberValue, seconds.isFinite, seconds >= 0 else { throw ValidationError("'iat' must be seconds since 1970") }
                iat = seconds
            }
            return checkOnly ? "" : try factory.make(type: type, subject: subject, extra: extra, jti: description["jti"]?.stringValue, iat: iat)
        }

        /// A verifier over a pinned JWK Set file, for `--dry-run` and `--local`.
        func verifier(jwksFile file: String, policy: SETPolicy? = nil) throws -> SETVerifier {
            SETVerifier(
                policy: policy ?? SETPolicy(audiences: Set(audiences.isEmpty ? [aud] : audiences)),
                keys: StaticKeyProvider(keys: try readJWKSet(file, what: file == jwksFile ? "--jwks-file" : "the key set"), issuer: iss))
        }

        /// The key set a local run (`--dry-run`, `--local`) verifies against: `--jwks-file`, else the
        /// configuration's `jwks_file`, else, for SETs signed here, the JWKS of `--keys`.
        func localKeySet(configured: String?, signedHere: Bool) -> String? {
            jwksFile ?? configured ?? (signedHere ? (keys as NSString).appendingPathComponent("jwks.json") : nil)
        }

        /// The receiver's policy (its audiences, aliases, algorithms) when `--config` names it and no
        /// `--audience` replaces it; nil: `verifier`'s own.
        func localPolicy(_ configuration: ReceiverConfiguration) -> SETPolicy? {
            config == nil || !audiences.isEmpty ? nil : configuration.policy
        }

        /// The receiver's configuration of `--config`, read as `risc serve` reads it.
        func receiverConfiguration() throws -> ReceiverConfiguration? {
            try config.map {
                try ReceiverConfiguration.load(file: $0, flags: StoreOption.flags(dataDir: dataDir, storeURL: storeURL, tokenKeyFile: tokenKeyFile))
            }
        }

        /// Verifies and plans one SET, printing its line (or its error's); false when it does not verify.
        func dryRunPlanner(signedHere: Bool) throws -> (String) async throws -> Bool {
            let configuration = try receiverConfiguration()
            let verifier: SETVerifier? = try localKeySet(configured: configuration?.jwksFile, signedHere: signedHere).map {
                try self.verifier(jwksFile: $0, policy: configuration.flatMap(localPolicy))
            }
            if verifier == nil { FileHandle.standardError.write(Data("risc: no --jwks-file: decoding without verifying\n".utf8)) }
            let table = configuration?.appliedTable ?? .default
            return { token in
                do {
                    let claims: SecurityEventToken
                    if let verifier {
                        claims = try await verifier.verify(Array(token.utf8), now: systemNow()).token
                    } else {
                        claims = try SecurityEventToken(payload: CompactJWS(token).payload)
                    }
                    let plan = ActionPlan.plan(for: claims, table: table, now: systemNow())
                    var line = JSONObject()
                    line["jti"] = .string(claims.tokenID ?? "")
                    line["verified"] = .bool(verifier != nil)
                    line["events"] = .array(
                        plan.steps.map { step in
                            .object([
                                "type": .string(step.type.shortName), "subject": step.subject?.json ?? .null,
                                "actions": .array(step.actions.map { .string($0.rawValue) }),
                            ])
                        })
                    print(JSONValue.object(line).serialized)
                    return true
                } catch let error as SETError {
                    print(error.responseBody)
                    return false
                }
            }
        }

        /// `--local`: store (or requeue) the SETs, run the action worker until nothing is due, report.
        func runLocal() async throws {
            // Where the store is: as every command finds it (flags, RISC_* variables, --config).
            // Stored SETs need the store; new ones may make it, with --create.
            let resolved = try storeSettings()
            if fromStore || !creation.create { try resolved.requireEmbeddedStore(creatable: !fromStore) }
            // A receiver's file is checked as `risc serve` checks it.
            let configuration = try receiverConfiguration() ?? resolved.configuration
            let directory = configuration.dataDirectory
            var logger = Logger(label: "risc.replay") { StreamLogHandler.standardError(label: $0) }
            logger.logLevel = .warning
            try PrivateFiles.makeDirectory(directory)  // its event log, whichever the store
            // A receiver running on this data directory (PostgreSQL) writes events.log: one writer
            // a file keeps each chain whole, so this run's lines go beside it.
            let log = try commandEventLog(in: directory, beside: "events.replay.log", who: "risc replay", what: "this run's lines go to")
            defer { log.close() }
            // The receiver's own storage and workers (on PostgreSQL with their leases, so a running
            // receiver never applies one twice), driven here until nothing is due.
            let storage = try ReceiverStorage.open(configuration: configuration, log: log, logger: logger)
            defer { storage.store.close() }
            try await storage.store.prepare(logger: logger)
            let admin = try storage.store.admin(within: CommandStore.sharedCallDeadline, clock: systemUptime)
            var ids: [Int64] = []
            var refused = 0, duplicates = 0
            if fromStore {
                ids = try await admin.requeue(ids: admin.ids(try selection()))
                guard !ids.isEmpty else { throw ValidationError("no stored SET matches") }
                try await Self.inPages(ids, admin) { row in
                    var record = EventLogRecord(step: .replayed, outcome: .requeued, time: systemNow())
                    let outcome = row.outcomeJSON
                    record["jti"] = outcome["jti"]
                    record["events"] = outcome["events"]
                    log.record(record)
                }
            } else {
                (ids, duplicates, refused) = try await receiveAll(into: storage.events, configuration: configuration, log: log)
            }
            var processed = 1
            while processed > 0 {
                processed = 0
                for worker in storage.workers { processed += try await worker.processDue() }
            }
            try await report(admin, ids: ids, duplicates: duplicates, refused: refused)
        }

        /// The rows of `ids`, read a page of 1,000 at a time (a million SETs with the memory of a page).
        static func inPages(_ ids: [Int64], _ admin: any QueueAdministration, _ each: (QueueRow) throws -> Void) async throws {
            for start in stride(from: 0, to: ids.count, by: 1_000) {
                for row in try await admin.rows(ids: Array(ids[start..<min(start + 1_000, ids.count)])) { try each(row) }
            }
        }

        /// Verifies and stores the SOURCE's SETs as the receiver would: their ids, duplicates, refusals.
        func receiveAll(into store: any EventStore, configuration: ReceiverConfiguration, log: any EventLog) async throws
            -> (ids: [Int64], duplicates: Int, refused: Int)
        {
            var intake: Intake?
            var result: (ids: [Int64], duplicates: Int, refused: Int) = ([], 0, 0)
            try await sourcePages { page in
                if intake == nil {
                    // `--local` falls back to `--keys`' JWKS whatever SOURCE holds (signed here or not).
                    let file = localKeySet(configured: configuration.jwksFile, signedHere: true)!
                    intake = Intake(verifier: try verifier(jwksFile: file, policy: localPolicy(configuration)), store: store, log: log, clock: systemNow)
                }
                for token in page.tokens {
                    do {
                        switch try await intake!.receive(.init(body: Array(token.utf8), remoteAddress: "local", contentType: nil)) {
                        case .accepted(let id): result.ids.append(id)
                        case .duplicate: result.duplicates += 1
                        case .journaled: break  // only the push endpoint journals
                        }
                    } catch let error as SETError {
                        result.refused += 1
                        print(error.responseBody)
                    }
                }
            }
            return result
        }

        /// Prints each replayed SET's outcome and the summary table; exits 1 unless all were applied.
        func report(_ admin: any QueueAdministration, ids: [Int64], duplicates: Int, refused: Int) async throws {
            var counts: [String: Int] = [:]
            try await Self.inPages(ids, admin) { row in
                let outcome = row.outcomeJSON
                print(JSONValue.object(outcome).serialized)
                counts[outcome["state"]?.stringValue ?? "?", default: 0] += 1
            }
            var rows = [("replayed", "\(ids.count)"), ("applied", "\(counts["done", default: 0])")]
            if !fromStore {
                rows.append(("duplicate (not applied again)", "\(duplicates)"))
                rows.append(("refused", "\(refused)"))
            }
            rows.append(("retrying", "\(counts["retrying", default: 0])"))
            rows.append(("dead-lettered", "\(counts["dead", default: 0])"))
            print(rows.map { $0.0.padded(30) + $0.1 }.joined(separator: "\n"))
            if refused > 0 || counts["done", default: 0] < ids.count { throw ExitStatus.rejected }
        }
    }
}
