import Foundation

/// App Flip checks for the site's authorization side (`../shared/docs/linking.md` §4): is an
/// incoming App Flip link (or authorization request) from Google acceptable, and the redirect back
/// to Google with `code` and `state`, or with the error Google's fallback needs.
///
/// A `redirect_uri` is trusted only in its exact documented form,
/// `https://HOST/a/BUNDLE_ID` with HOST Google's production or sandbox redirect host (or one the
/// site configured) and BUNDLE_ID one of the Google apps' (or a configured one): no port, no user
/// info, no query or fragment, no percent-encoding, nothing but the letters a host and a bundle id
/// are made of. An untrusted one is never redirected to (that would be an open redirect): the
/// verdict then has no redirect, and the site shows its own error page.
public struct AppFlipPolicy: Sendable, Equatable {
    /// The OAuth client id the site registered for Google (`linking.google_client_id`).
    public var clientID: String
    /// Redirect hosts: Google's production and sandbox ones, plus configured ones.
    public var hosts: Set<String>
    /// Bundle ids of the Google apps that do App Flip, plus configured ones.
    public var bundleIDs: Set<String>

    public static let googleHosts: Set<String> = ["oauth-redirect.googleusercontent.com", "oauth-redirect-sandbox.googleusercontent.com"]
    /// The Google Home and Google Assistant apps, production, dev and enterprise builds.
    public static let googleBundleIDs: Set<String> = [
        "com.google.Chromecast", "com.google.Chromecast.dev", "com.google.Chromecast.enterprise",
        "com.google.OPA", "com.google.OPA.dev", "com.google.OPA.enterprise",
    ]

    public init(clientID: String, extraHosts: [String] = [], extraBundleIDs: [String] = []) {
        self.clientID = clientID
        hosts = Self.googleHosts.union(extraHosts.map { $0.lowercased() })
        bundleIDs = Self.googleBundleIDs.union(extraBundleIDs)
    }
}

/// What the user (or the site) decided, once the link itself is acceptable.
public enum AppFlipOutcome: String, Sendable, CaseIterable {
    /// The user approved: redirect with the authorization code.
    case approve
    /// The user refused: `access_denied` (linking aborts).
    case deny
    /// The user backed out: `cancelled` (Google falls back to web linking).
    case cancel
}

/// The App Flip error codes Google's app understands.
public enum AppFlipError: String, Sendable {
    /// Recoverable: a mismatched client id, a missing state, a malformed request.
    case invalidRequest = "invalid_request"
    /// Not recoverable, e.g. an account whose Google sign-in is suspended: linking aborts.
    case unrecoverable
    case accessDenied = "access_denied"
    case cancelled
}

/// The answer to one App Flip link.
public struct AppFlipVerdict: Sendable, Equatable {
    /// The link is acceptable and the outcome is `approve`.
    public let acceptable: Bool
    /// The error sent back, if any.
    public let error: AppFlipError?
    /// Why, in words (for the site's logs; sent as `error_description` with an error).
    public let reason: String
    /// Where to send the user: the trusted `redirect_uri` with `code` and `state`, or with `error`
    /// and `state`. nil when the `redirect_uri` cannot be trusted: show an error page instead.
    public let redirect: String?

    public var json: JSONValue {
        var object = JSONObject()
        object["acceptable"] = .bool(acceptable)
        object["error"] = error.map { .string($0.rawValue) } ?? .null
        object["reason"] = .string(reason)
        object["redirect"] = redirect.map { .string($0) } ?? .null
        return .object(object)
    }
}

public enum AppFlip {
    /// Checks `link` (the universal link or authorization request URL Google opened) against
    /// `policy` and builds the redirect for `outcome` (`code` is required to approve).
    /// `accountSuspended`: risc suspended the user's Google sign-in (after a hijacking or a
    /// disabled Google account); such an account is never relinked: `unrecoverable`.
    public static func check(
        _ link: String, policy: AppFlipPolicy, outcome: AppFlipOutcome = .approve, code: String? = nil, accountSuspended: Bool = false
    ) -> AppFlipVerdict {
        guard let components = URLComponents(string: link), let items = components.queryItems else {
            return AppFlipVerdict(acceptable: false, error: .invalidRequest, reason: "the link has no query to read", redirect: nil)
        }
        var query: [String: String] = [:]
        for item in items {
            // A parameter given twice could be read one way here and another by the next reader.
            guard query[item.name] == nil else {
                return AppFlipVerdict(acceptable: false, error: .invalidRequest, reason: "\(item.name) is given twice", redirect: nil)
            }
            query[item.name] = item.value ?? ""
        }
        guard let redirectURI = query["redirect_uri"] else {
            return AppFlipVerdict(acceptable: false, error: .invalidRequest, reason: "no redirect_uri", redirect: nil)
        }
        if let problem = untrusted(redirectURI, policy: policy) {
            return AppFlipVerdict(acceptable: false, error: .invalidRequest, reason: "redirect_uri \(problem)", redirect: nil)
        }
        let state = query["state"]
        func answer(_ error: AppFlipError, _ reason: String) -> AppFlipVerdict {
            AppFlipVerdict(
                acceptable: false, error: error, reason: reason,
                redirect: redirect(redirectURI, [("error", error.rawValue), ("error_description", reason), ("state", state)]))
        }
        guard query["client_id"] == policy.clientID else {
            return answer(.invalidRequest, query["client_id"] == nil ? "no client_id" : "client_id is not the one registered for Google")
        }
        guard let state, !state.isEmpty else { return answer(.invalidRequest, "no state") }
        if accountSuspended {
            return answer(.unrecoverable, "the account's Google sign-in is suspended (a security event): it cannot be linked")
        }
        switch outcome {
        case .deny: return answer(.accessDenied, "the user refused")
        case .cancel: return answer(.cancelled, "the user cancelled")
        case .approve:
            guard let code, !code.isEmpty else { return answer(.invalidRequest, "no authorization code to return") }
            return AppFlipVerdict(acceptable: true, error: nil, reason: "acceptable", redirect: redirect(redirectURI, [("code", code), ("state", state)]))
        }
    }

    /// Why `uri` is not a redirect URI to trust, or nil when it is one.
    static func untrusted(_ uri: String, policy: AppFlipPolicy) -> String? {
        let prefix = "https://"
        guard uri.hasPrefix(prefix) else { return "is not https://" }
        let rest = uri.dropFirst(prefix.count)
        guard let slash = rest.firstIndex(of: "/") else { return "has no path" }
        let host = rest[..<slash], path = rest[slash...]
        let hostLetters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
        guard !host.isEmpty, host.allSatisfy(hostLetters.contains) else {
            return "has a host with characters a host name does not have (port, user info, encoding)"
        }
        guard policy.hosts.contains(host.lowercased()) else { return "host \(host) is not Google's redirect host" }
        guard path.hasPrefix("/a/") else { return "path is not /a/BUNDLE_ID" }
        let bundle = path.dropFirst(3)
        guard !bundle.isEmpty, bundle.allSatisfy(hostLetters.contains) else {
            return "has a path with characters a bundle id does not have (slashes, query, fragment, encoding)"
        }
        guard policy.bundleIDs.contains(String(bundle)) else { return "bundle id \(bundle) is not a Google app's" }
        return nil
    }

    /// `base` with the parameters appended, percent-encoded (nil values left out).
    static func redirect(_ base: String, _ parameters: [(String, String?)]) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let pairs = parameters.compactMap { name, value in
            value.map { name + "=" + ($0.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "") }
        }
        return base + "?" + pairs.joined(separator: "&")
    }
}
