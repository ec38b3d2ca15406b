/// A failed RISC management API call, with what to do about it (spec §1.10.6).
public struct RISCAPIError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status, or nil when no answer came (transport error).
    public let status: Int?
    /// Google's message (`error.message` of its JSON error body), or the transport error.
    public let message: String
    /// What to do, for the known cases.
    public let advice: String?

    /// A temporary failure worth retrying (5xx, 429, no answer).
    public var isTemporary: Bool { status == nil || status == 429 || (status ?? 0) >= 500 }

    public var description: String {
        var text = status.map { "RISC API answered \($0): \(message)" } ?? "RISC API unreachable: \(message)"
        if let advice { text += "\n  → " + advice }
        return text
    }

    public init(status: Int?, message: String) {
        self.status = status
        self.message = message
        advice = Self.advice(status: status, message: message)
    }

    /// Google's documented errors, matched on status and message, with the fix.
    static let table: [(status: Int?, fragment: String, advice: String)] = [
        (400, "must contain", "the request body lacks a field Google requires; `risc stream update` sends delivery.delivery_method, delivery.url and events_requested — check --url and --events"),
        (
            401, "",
            "the bearer token was refused: check that the key file belongs to an active service account (keys can be disabled or deleted in IAM → Service accounts → Keys) and that this machine's clock is right (the token is valid for one hour from now)"
        ),
        (403, "must be an HTTPS URL", "Google delivers only to https:// URLs: give --url https://… (terminate TLS in risc with tls.certificate/tls.key, or in a proxy)"),
        (
            403, "spec-compliant delivery method",
            "Firebase manages Cross-Account Protection for this project (Google Sign-In enabled in Firebase Authentication). If you do not use it there, disable Google Sign-In in Firebase and retry in an hour"
        ),
        (403, "Project could not be found", "the service account's project no longer exists or is not the one you meant: create the key in the project your Sign in with Google client IDs belong to"),
        (403, "needs permission", "grant the service account the role RISC Configuration Admin (roles/riscconfigs.admin) in IAM, then retry"),
        (403, "only be called by a service account", "use a service account's JSON key (--credentials), not user or OAuth client credentials"),
        (
            403, "does not belong to any of your project's domains",
            "add the receiver's domain to the project's authorized domains (APIs & Services → OAuth consent screen → Authorized domains), then retry"
        ),
        (403, "at least one OAuth client", "create an OAuth client ID in the project (APIs & Services → Credentials) — the one your sign-in uses"),
        (403, "status", "only 'enabled' and 'disabled' are valid stream statuses"),
        (403, "RISC API has not been used", "enable the RISC API (risc.googleapis.com) in the project, after accepting the RISC terms"),
        (403, "", "permission denied: check the project's RISC API is enabled and the service account has roles/riscconfigs.admin"),
        (404, "", "the project has no RISC stream yet: run `risc stream update --url https://…` first"),
        (429, "", "rate-limited by Google: wait a minute and retry"),
        (nil, "", "could not reach the RISC API: check the network path to risc.googleapis.com (proxy, firewall, DNS) and --api-base"),
    ]

    static func advice(status: Int?, message: String) -> String? {
        let lowered = message.lowercased()
        for row in table where row.status == status && (row.fragment.isEmpty || lowered.contains(row.fragment.lowercased())) {
            return row.advice
        }
        if let status, status >= 500 { return "Google's side failed (\(status)); retry later" }
        return nil
    }
}
