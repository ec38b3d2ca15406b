import ArgumentParser
import Foundation
import RISCCore

extension RiscCommand {
    struct Linking: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Account-linking tools for the site's authorization side.",
            subcommands: [CheckURL.self, Revoke.self]
        )
    }
}

extension RiscCommand.Linking {
    struct CheckURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-url",
            abstract: "Check an App Flip link from Google and print the redirect back (code + state, or the error).",
            discussion: """
                The redirect_uri is trusted only as https://HOST/a/BUNDLE_ID with Google's production or sandbox \
                redirect host (or --host) and a Google app's bundle id (or --bundle-id); an untrusted one is never \
                redirected to. With --user, an account of that user whose Google sign-in risc suspended gets \
                `unrecoverable`. Exit 0 when the link is acceptable and approved, 1 otherwise.
                """
        )

        @Argument(help: "The universal link or authorization request URL Google opened.") var url: String
        @Option(help: "The OAuth client id the site registered for Google.") var clientID: String
        @Option(help: "The authorization code to return (approve).") var code: String?
        @Flag(help: "The user refused: access_denied.") var deny = false
        @Flag(help: "The user backed out: cancelled.") var cancel = false
        @Option(help: "The site's user id: refuse (unrecoverable) if risc suspended its Google sign-in.") var user: String?
        @Option(help: "Another accepted redirect host (repeatable).") var host: [String] = []
        @Option(help: "Another accepted app bundle id (repeatable).") var bundleID: [String] = []
        @Flag(help: "JSON output.") var json = false
        @OptionGroup var store: StoreOption

        func validate() throws {
            guard !(deny && cancel) else { throw ValidationError("--deny or --cancel, not both") }
        }

        func run() async throws {
            var suspended = false
            if let user {
                let opened = try await store.open(accounts: true)
                defer { opened.close() }
                suspended = try await opened.accounts().googleSignInSuspended(userID: user)
            }
            let outcome: AppFlipOutcome = deny ? .deny : cancel ? .cancel : .approve
            let verdict = AppFlip.check(
                url, policy: AppFlipPolicy(clientID: clientID, extraHosts: host, extraBundleIDs: bundleID), outcome: outcome, code: code,
                accountSuspended: suspended)
            if json {
                print(verdict.json.serialized)
            } else {
                print(verdict.acceptable ? "acceptable" : "not acceptable: \(verdict.error?.rawValue ?? "") (\(Printable.safe(verdict.reason)))")
                print(verdict.redirect.map { "redirect: \(Printable.safe($0, maxBytes: 2_048))" } ?? "no redirect: the redirect_uri is not to be trusted; show an error page")
            }
            if !verdict.acceptable { throw ExitStatus.rejected }
        }
    }
}

extension RiscCommand.Linking {
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record that the site revoked an account's linked tokens, and tell Google (unlink notices).",
            discussion: """
                Marks the account's active linked tokens revoked (all of them, or those named by --token-stdin and \
                --token-hash) and, with linking.notices.issuer in --config, queues a signed token-revoked notice to \
                Google for each, in the same transaction; the running receiver publishes them, retrying with backoff \
                (`risc queue` shows them). Raw tokens given on standard input are fingerprinted at once and never stored. \
                Prints {"revoked", "notices_queued", "not_found"}; exit 1 when there is no such account.
                """
        )

        @Argument(help: "The Google account ID (sub).") var subject: String
        @Option(help: "Only the account of this issuer (default: any).") var issuer: String?
        @Flag(help: "Read the linked tokens to revoke from standard input, one per line.") var tokenStdin = false
        @Option(help: "A linked token's fingerprint (base64 SHA-512 of SHA-512), repeatable.") var tokenHash: [String] = []
        @Option(help: "token_type the notices name: access_token or refresh_token (default: linking.notices.token_type).")
        var tokenType: String?
        @OptionGroup var store: StoreOption

        func validate() throws {
            if let tokenType, !UnlinkNotices.tokenTypes.contains(tokenType) {
                throw ValidationError("--token-type is access_token or refresh_token")
            }
            if let bad = tokenHash.first(where: { TokenFingerprint.normalizedHash($0) == nil }) {
                throw ValidationError("--token-hash '\(Printable.safe(bad, maxBytes: 40))' is not a base64 SHA-512 fingerprint")
            }
        }

        func run() async throws {
            var hashes: [String]?
            if tokenStdin {
                var lines: [String] = []
                while let line = readLine() {
                    let token = line.trimmingCharacters(in: .whitespacesAndNewlines)
                    if !token.isEmpty { lines.append(SHA512.doubleHashBase64(token)) }
                }
                guard !lines.isEmpty else { throw ValidationError("--token-stdin: no token on standard input") }
                hashes = lines
            }
            if !tokenHash.isEmpty { hashes = (hashes ?? []) + tokenHash.compactMap(TokenFingerprint.normalizedHash) }
            let opened = try await store.open(accounts: true)
            defer { opened.close() }
            let (accounts, notices) = try opened.accountsAndNotices()
            guard
                let result = try await accounts.revokeLinkedTokens(
                    subject: subject, issuer: issuer, hashes: hashes, tokenType: tokenType, reason: LinkedTokenRevocation.siteReason, notices: notices,
                    now: systemNow())
            else {
                FileHandle.standardError.write(Data("risc: no account with subject \(Printable.safe(subject))\n".utf8))
                throw ExitStatus.rejected
            }
            opened.recordSite(.linkedTokensRevoked, subject: subject, notices: notices != nil, fields: result.json.objectValue ?? [:])
            if notices == nil {
                FileHandle.standardError.write(Data("risc: unlink notices are off (no linking.notices.issuer in the configuration): Google is not told\n".utf8))
            }
            print(result.json.serialized)
        }
    }
}
