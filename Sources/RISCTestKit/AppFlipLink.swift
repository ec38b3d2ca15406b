import Foundation

/// App Flip links as Google's app opens them, for tests of `AppFlip.check` and what serves it.
public enum AppFlipLink {
    /// `https://site.example/app-flip?client_id=…&scope=…&state=…&redirect_uri=…` with each value
    /// percent-encoded once (nil leaves the parameter out); `extra` is appended as it is.
    public static func make(redirect: String, clientID: String? = "google-client", state: String? = "st 1/2", extra: String = "") -> String {
        var query: [String] = []
        if let clientID { query.append("client_id=" + encode(clientID)) }
        query.append("scope=" + encode("profile email"))
        if let state { query.append("state=" + encode(state)) }
        query.append("redirect_uri=" + encode(redirect))
        return "https://site.example/app-flip?" + query.joined(separator: "&") + extra
    }

    /// `value` percent-encoded for a query: everything but RFC 3986's unreserved characters.
    public static func encode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? ""
    }
}
