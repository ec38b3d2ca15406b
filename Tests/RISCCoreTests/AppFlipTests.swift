import Foundation
import RISCCore
import RISCTestKit
import Testing

/// Issue 15 §4: App Flip links checked, the redirect back built, look-alikes never redirected to.
@Suite("App Flip checks")
struct AppFlipTests {
    static let policy = AppFlipPolicy(clientID: "google-client", extraHosts: ["redirect.example.com"], extraBundleIDs: ["com.example.Tester"])

    static func link(redirect: String, clientID: String? = "google-client", state: String? = "st 1/2", extra: String = "") -> String {
        AppFlipLink.make(redirect: redirect, clientID: clientID, state: state, extra: extra)
    }

    @Test("Google's production and sandbox hosts, each Google app, configured hosts and apps: approved with code and the exact state")
    func accepted() {
        for host in ["oauth-redirect.googleusercontent.com", "oauth-redirect-sandbox.googleusercontent.com", "redirect.example.com", "OAUTH-REDIRECT.googleusercontent.com"] {
            for bundle in AppFlipPolicy.googleBundleIDs.sorted() + ["com.example.Tester"] {
                let redirect = "https://\(host)/a/\(bundle)"
                let verdict = AppFlip.check(Self.link(redirect: redirect), policy: Self.policy, code: "c0de+/=")
                #expect(verdict.acceptable && verdict.error == nil, "\(redirect): \(verdict.reason)")
                #expect(verdict.redirect == redirect + "?code=c0de%2B%2F%3D&state=st%201%2F2")
            }
        }
    }

    @Test(
        "look-alike and malformed redirect URIs: refused, and never redirected to",
        arguments: [
            "https://oauth-redirect.googleusercontent.com.evil.example/a/com.google.OPA",
            "https://evil.example/a/com.google.OPA",
            "http://oauth-redirect.googleusercontent.com/a/com.google.OPA",
            "https://oauth-redirect.googleusercontent.com/r/my-project",
            "https://oauth-redirect.googleusercontent.com/a/com.google.OPA/extra",
            "https://oauth-redirect.googleusercontent.com/a/com.google.opa",
            "https://oauth-redirect.googleusercontent.com/a/com.evil.App",
            "https://oauth-redirect.googleusercontent.com/a/",
            "https://oauth-redirect.googleusercontent.com",
            "https://oauth-redirect.googleusercontent.com:444/a/com.google.OPA",
            "https://oauth-redirect.googleusercontent.com@evil.example/a/com.google.OPA",
            "https://evil.example\\@oauth-redirect.googleusercontent.com/a/com.google.OPA",
            "https://oauth-redirect.googleusercontent.com%2Eevil.example/a/com.google.OPA",
            "https://oauth-redirect.googleusercontent.com/a/com.google.OPA%2F..%2Fevil",
            "https://oauth-redirect.googleusercontent.com/a/com.google.OPA?next=https://evil.example",
            "https://oauth-redirect.googleusercontent.com/a/com.google.OPA#https://evil.example",
            "https://oauth-redirect.googleusercontent.com/a/../a/com.google.OPA",
            " https://oauth-redirect.googleusercontent.com/a/com.google.OPA",
            "https://oauth-redirect.googleusercontent.com./a/com.google.OPA",
            "HTTPS://oauth-redirect.googleusercontent.com/a/com.google.OPA",
        ])
    func lookAlikes(_ redirect: String) {
        let verdict = AppFlip.check(Self.link(redirect: redirect), policy: Self.policy, code: "c")
        #expect(!verdict.acceptable && verdict.error == .invalidRequest && verdict.redirect == nil, "\(redirect): \(verdict)")
    }

    @Test("every error code goes back to a trusted redirect URI with the state")
    func errors() {
        let redirect = "https://oauth-redirect.googleusercontent.com/a/com.google.Chromecast"
        func check(_ link: String, _ outcome: AppFlipOutcome = .approve, code: String? = "c", suspended: Bool = false) -> AppFlipVerdict {
            AppFlip.check(link, policy: Self.policy, outcome: outcome, code: code, accountSuspended: suspended)
        }
        let wrongClient = check(Self.link(redirect: redirect, clientID: "someone-else"))
        #expect(wrongClient.error == .invalidRequest && wrongClient.redirect?.hasPrefix(redirect + "?error=invalid_request&") == true)
        #expect(wrongClient.redirect?.hasSuffix("&state=st%201%2F2") == true)
        #expect(check(Self.link(redirect: redirect, clientID: nil)).error == .invalidRequest)
        let noState = check(Self.link(redirect: redirect, state: nil))
        #expect(noState.error == .invalidRequest && noState.redirect?.contains("state=") == false)
        #expect(check(Self.link(redirect: redirect), code: nil).error == .invalidRequest)
        let suspended = check(Self.link(redirect: redirect), suspended: true)
        #expect(suspended.error == .unrecoverable && suspended.redirect?.hasPrefix(redirect + "?error=unrecoverable&") == true)
        // Suspension wins over the user's approval: a hijacked account is not relinked.
        #expect(!suspended.acceptable)
        #expect(check(Self.link(redirect: redirect), .deny).redirect?.hasPrefix(redirect + "?error=access_denied&") == true)
        #expect(check(Self.link(redirect: redirect), .cancel).redirect?.hasPrefix(redirect + "?error=cancelled&") == true)
        // A parameter given twice is ambiguous: refused without a redirect.
        let twice = check(Self.link(redirect: redirect, extra: "&redirect_uri=" + AppFlipLink.encode("https://evil.example/a/com.google.OPA")))
        #expect(twice.error == .invalidRequest && twice.redirect == nil)
        #expect(check("not a url at all").redirect == nil)
    }
}
