import ArgumentParser
import Foundation
import RISCCore

extension RiscCommand {
    struct Linking: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Account-linking tools for the site's authorization side.",
            subcommands: [CheckURL.self]
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
                print(verdict.acceptable ? "acceptable" : "not acceptable: \(verdict.error?.rawValue ?? "") (\(verdict.reason))")
                print(verdict.redirect.map { "redirect: \($0)" } ?? "no redirect: the redirect_uri is not to be trusted; show an error page")
            }
            if !verdict.acceptable { throw ExitStatus.rejected }
        }
    }
}
