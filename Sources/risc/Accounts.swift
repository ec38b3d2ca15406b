import ArgumentParser
import Foundation
import RISCCore
import RISCLocal

extension RiscCommand {
    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage the linked-account store (Google accounts to your users, sessions, tokens), embedded or shared.",
            subcommands: [Link.self, Import.self, List.self, Show.self, Unlink.self]
        )
    }
}

extension RiscCommand.Accounts {
    struct Link: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Link a Google account (sub) to a local user.")
        @Option(help: "The Google account ID (sub).") var subject: String
        @Option(help: "Your local user ID.") var user: String
        @Option(help: "The account's email, for lookups by email.") var email: String?
        @Option(help: "Issuer of the sub.") var issuer: String = "https://accounts.google.com"
        @Option(name: .customLong("session"), help: "An open session ID (repeatable).") var sessions: [String] = []
        @Option(name: .customLong("refresh-token-file"), help: "File with a Google refresh token you hold (repeatable).", transform: OptionRange.path)
        var refreshTokenFiles: [String] = []
        @Option(name: .customLong("linked-token-file"), help: "File with a token you issued to Google by account linking (repeatable).", transform: OptionRange.path)
        var linkedTokenFiles: [String] = []
        @OptionGroup var data: StoreOption
        @OptionGroup var creation: CreateOption

        func validate() throws {
            let given = [("--subject", subject), ("--user", user), ("--issuer", issuer)] + (email.map { [("--email", $0)] } ?? [])
            do { for (name, text) in given { try AccountLink.check(text, named: name) } } catch { throw ValidationError(error.description) }
            if sessions.contains(where: \.isEmpty) { throw ValidationError("--session must not be empty") }
        }

        func run() async throws {
            let store = try await data.open(accounts: true, create: creation.create)
            defer { store.close() }
            // The user the account was linked to, when it is moved to another (a mistyped --user shows).
            let before = try await store.accounts().linkReportingMove(
                AccountLink(
                    issuer: issuer, subject: subject, userID: user, email: email, sessions: sessions,
                    refreshTokens: try refreshTokenFiles.map { try readToken($0, what: "--refresh-token-file") },
                    linkedTokens: try linkedTokenFiles.map { try readToken($0, what: "--linked-token-file") }),
                now: systemNow())
            let moved = before.map { "was \(Printable.safe($0)); " } ?? ""
            if let before {
                store.recordSite(.relinked, subject: subject, notices: false, fields: ["user_id": .string(user), "previous_user_id": .string(before)])
            }
            let tokens = refreshTokenFiles.count + linkedTokenFiles.count
            print(
                "linked \(Printable.safe(subject)) → \(Printable.safe(user)) (\(moved)\(sessions.count) session\(sessions.count == 1 ? "" : "s"), \(tokens) token\(tokens == 1 ? "" : "s"); tokens kept as fingerprints only)"
            )
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import accounts from JSON lines: {\"subject\", \"user_id\", \"email\"?, \"sessions\"?, \"refresh_tokens\"?, \"linked_tokens\"?, \"issuer\"?}.",
            discussion: """
                All or nothing: every line is checked first (no other member, non-empty subject and user_id, lists of \
                non-empty strings, one line per account), and one bad line imports none and names every bad line (exit \
                64). Then the accounts are written in transactions of 20,000 (about a second each), so a receiver \
                beside the import stores SETs and applies their actions between them; an import cut short (killed, a full disk) is \
                completed by running it again (an account imported again is updated, its sessions and tokens kept \
                once). A file is read a chunk at a time, twice, whatever its size; standard input is held in memory, \
                at most 256 MiB (past that, write it to a file). A session is its id, or {"id", "created_at"} with the time it began (seconds since \
                1970): "end sessions" spares sessions begun after the event, and one given without begins at the \
                import.
                """)
        @Argument(help: "JSON-lines file, or - for standard input.", transform: OptionRange.path) var file: String = "-"
        @OptionGroup var data: StoreOption
        @OptionGroup var creation: CreateOption

        /// Accounts a transaction.
        static let chunk = 20_000

        /// Line `number`'s account; nil for a blank line.
        static func link(_ line: ArraySlice<UInt8>, number: Int, now: Double) throws -> AccountLink? {
            guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return nil }
            do { return try AccountLink(json: try JSONParser.parseObject(Array(line)), now: now) } catch { throw ValidationError("line \(number): \(error)") }
        }

        /// An account's issuer and subject as a 128-bit digest: where each came first is kept for a
        /// million accounts in tens of megabytes, not their text.
        static func key(_ link: AccountLink) -> SIMD2<UInt64> {
            SHA256.hash(Array((SETPolicy.issuerScope(link.issuer) + "\u{0}" + link.subject).utf8)).withUnsafeBytes {
                SIMD2($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
        }

        func run() async throws {
            let now = systemNow()
            let input = try InputLines(file, command: "import")
            var problems: [String] = [], bad = 0, count = 0
            var seen: [SIMD2<UInt64>: Int] = [:]
            try await input.forEach { number, line in
                do {
                    guard let link = try Self.link(line, number: number, now: now) else { return }
                    let key = Self.key(link)
                    if let first = seen[key] {
                        throw ValidationError("line \(number): subject \(Printable.safe(link.subject, maxBytes: 64)) again (first on line \(first))")
                    }
                    seen[key] = number
                    count += 1
                } catch {
                    bad += 1
                    if problems.count < 20 { problems.append("\(error)") }
                }
            }
            guard bad == 0 else {
                let shown = problems.map { "  - \($0)" }.joined(separator: "\n")
                throw ValidationError("nothing imported:\n\(shown)\(bad > 20 ? "\n  … and \(bad - 20) more" : "")")
            }
            seen = [:]
            let opened = try await data.open(accounts: true, create: creation.create)
            defer { opened.close() }
            let accounts = try opened.accounts()
            var batch: [AccountLink] = [], written = 0
            try await input.forEach { number, line in
                guard let link = try Self.link(line, number: number, now: now) else { return }
                batch.append(link)
                guard batch.count == Self.chunk else { return }
                _ = try await accounts.link(batch, now: now)
                (written, batch) = (written + batch.count, [])
            }
            if !batch.isEmpty { _ = try await accounts.link(batch, now: now) }
            written += batch.count
            guard written == count else {
                throw ValidationError("\(file) changed while it was imported: \(written) accounts written of the \(count) checked; run the import again")
            }
            print("imported \(count) account\(count == 1 ? "" : "s")")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List linked accounts.")
        @Flag(help: "JSON output.") var json = false
        @OptionGroup var data: StoreOption

        func run() async throws {
            let store = try await data.open(accounts: true)
            defer { store.close() }
            let repository = try store.accounts()
            // A page at a time: a million accounts are listed with the memory of one page.
            var after: Int64 = 0
            var first = true
            if !json {
                print("SUBJECT                    USER            SIGN-IN  RECOVERY  REVIEW  MONITOR  SESSIONS  TOKENS")
            }
            while true {
                let page = try await repository.accounts(subject: nil, after: after, limit: 1_000)
                for a in page {
                    if json {
                        print(first ? "[\n  " : ",\n  ", a.json.prettyPrinted(level: 1), separator: "", terminator: "")
                        first = false
                        continue
                    }
                    print(
                        [
                            Printable.safe(a.subject).padded(26), Printable.safe(a.userID).padded(15), (a.googleSignInEnabled ? "on" : "OFF").padded(8),
                            (a.emailRecoveryEnabled ? "on" : "OFF").padded(9), (a.flaggedForReview ? "yes" : "-").padded(7),
                            (a.heightenedMonitoring ? "yes" : "-").padded(8), "\(a.openSessions)/\(a.openSessions + a.endedSessions)".padded(9),
                            "\(a.activeTokens)/\(a.activeTokens + a.revokedTokens)",
                        ].joined(separator: " "))
                }
                guard let last = page.last else { break }
                after = last.id
            }
            if json { print(first ? "[]" : "\n]") }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one linked account.")
        @Argument(help: "The Google account ID (sub).") var subject: String
        @Flag(help: "JSON output.") var json = false
        @OptionGroup var data: StoreOption

        func run() async throws {
            let store = try await data.open(accounts: true)
            defer { store.close() }
            guard let account = try await store.accounts().accounts(subject: subject).first else {
                FileHandle.standardError.write(Data("risc: no account with subject \(Printable.safe(subject))\n".utf8))
                throw ExitStatus.rejected
            }
            print(json ? account.json.serialized : account.json.prettyPrinted)
        }
    }
}

extension RiscCommand.Accounts {
    struct Unlink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a linked account with its sessions and token fingerprints.",
            discussion: """
                The site's own record of the user is not touched: risc forgets the link. With linking.notices.issuer in \
                --config, an unlink notice to Google is queued for each of its active linked tokens first (the running \
                receiver publishes it). Exit 1 when there is no such account.
                """
        )
        @Argument(help: "The Google account ID (sub).") var subject: String
        @Option(help: "Only the account of this issuer (default: any).") var issuer: String?
        @OptionGroup var data: StoreOption

        func run() async throws {
            let store = try await data.open(accounts: true)
            defer { store.close() }
            let (accounts, notices) = try store.accountsAndNotices()
            let (removed, queued) = try await accounts.unlink(subject: subject, issuer: issuer, notices: notices, now: systemNow())
            guard removed > 0 else {
                FileHandle.standardError.write(Data("risc: no account with subject \(Printable.safe(subject))\n".utf8))
                throw ExitStatus.rejected
            }
            store.recordSite(.unlinked, subject: subject, notices: notices != nil, fields: ["notices_queued": .number(Double(queued))])
            print("unlinked \(Printable.safe(subject)) (\(removed) account\(removed == 1 ? "" : "s"), with its sessions and tokens)")
            if notices != nil { print("queued \(queued) unlink notice\(queued == 1 ? "" : "s") to Google") }
        }
    }
}

extension String {
    func padded(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
