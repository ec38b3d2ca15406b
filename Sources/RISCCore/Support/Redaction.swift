import Foundation

/// URLs from the configuration made safe to print: every output that shows one (`--print-config`,
/// `--check-config`, which systemd runs on each start so its output reaches the journal, the
/// start-up and diagnostic logs) shows it through `Redaction.url`.
///
/// A webhook or discovery URL may carry a secret in four places, each written `REDACTED`:
/// - a password (`https://user:REDACTED@host/`);
/// - query values (`?token=REDACTED&tenant=REDACTED`, the names kept);
/// - the fragment (`#REDACTED`);
/// - a path segment that looks like a token (`https://hooks.example/services/T0/B0/REDACTED`): at
///   least 16 characters with a digit and a letter, or at least 32 of any kind. Words such as
///   `.well-known` or `risc-configuration` stay, so the URL still says where it points.
/// The scheme, host and port are kept as they are.
public enum Redaction {
    public static let marker = "REDACTED"

    public static func url(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        let scheme = text[..<schemeEnd.upperBound]
        var rest = Substring(text[schemeEnd.upperBound...])
        var fragment = ""
        if let hash = rest.firstIndex(of: "#") {
            fragment = "#" + marker
            rest = rest[..<hash]
        }
        var query = ""
        if let question = rest.firstIndex(of: "?") {
            let items = rest[rest.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false)
            query =
                "?"
                + items.map { item in
                    guard let equals = item.firstIndex(of: "=") else { return String(item) }
                    return item[..<equals] + "=" + marker
                }.joined(separator: "&")
            rest = rest[..<question]
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = String(rest[..<slash])
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            let user = String(userInfo.prefix { $0 != ":" })
            let hidden: String = userInfo.contains(":") ? user + ":" + marker : marker
            authority = hidden + String(authority[at...])
        }
        let path = rest[slash...].split(separator: "/", omittingEmptySubsequences: false).map { looksLikeToken($0) ? marker : String($0) }
        let head = String(scheme) + authority
        return head + path.joined(separator: "/") + query + fragment
    }

    /// A path segment that may be a credential rather than a name.
    static func looksLikeToken(_ segment: Substring) -> Bool {
        let count = segment.unicodeScalars.count
        if count >= 32 { return true }
        guard count >= 16 else { return false }
        let digits = segment.unicodeScalars.contains { ("0"..."9").contains($0) }
        let letters = segment.unicodeScalars.contains { ("a"..."z").contains($0) || ("A"..."Z").contains($0) }
        return digits && letters
    }
}
