/// Which SETs the webhook hears of: `all` (every SET's plan, which the site applies: risc applies
/// nothing to its own accounts), or `rows` (only events whose row names the action `webhook`,
/// told what risc applies to its own accounts beside).
public enum WebhookScope: String, Sendable, CaseIterable {
    case all
    case rows
}

/// Where actions go when they are not applied to the embedded store: the site's own revocation
/// endpoint. Called on the worker's own thread, so it may block.
public protocol ActionSink: Sendable {
    /// Delivers one SET's plan, with the tokens the store holds that its actions revoke (one
    /// entry per token, by fingerprint). Returns a result line per step; throws to have the SET
    /// retried. `idempotencyKey` is the same for every delivery of one SET, from any receiver
    /// (`QueueWorker.idempotencyKey`), for the site to recognise a repeat. `appliedByRISC`: the
    /// plan's actions are applied by risc to its own accounts (`webhook.scope = rows`), the site
    /// is told of them. `now`: the worker's clock as it sends, the time the delivery is signed at.
    func deliver(_ plan: ActionPlan, tokens: [TokenToRevoke], tokenID: String, issuer: String, idempotencyKey: String, appliedByRISC: Bool, now: Double)
        throws -> [String]
}

/// A token the store holds a fingerprint of that an event's action revokes: every active
/// linked-account token of the account for `revoke_linked_tokens`, the matched token for
/// `revoke_token`. With a webhook the site's OAuth server is told (by fingerprint, never the
/// token), and once it has answered the store marks the token revoked.
public struct TokenToRevoke: Sendable, Equatable {
    /// The store's row (never sent).
    public let id: Int64
    public let eventIndex: Int
    public let action: Action
    public let kind: TokenKind
    /// `hash_base64_sha512_sha512`: base64 (standard, padded) of SHA-512(SHA-512(token)).
    public let hash: String
    /// What the store records as `revoked_reason` (`account-disabled:hijacking`).
    public let reason: String

    public init(id: Int64, eventIndex: Int, action: Action, kind: TokenKind, hash: String, reason: String) {
        self.id = id
        self.eventIndex = eventIndex
        self.action = action
        self.kind = kind
        self.hash = hash
        self.reason = reason
    }

    /// Which tokens of `step` to look for: all active linked tokens of its account
    /// (`revoke_linked_tokens`), the token its subject names (`revoke_token`), or none.
    public static func wanted(by step: ActionPlan.Step) -> (linked: Bool, matched: Bool) {
        (step.actions.contains(.revokeLinkedTokens), step.actions.contains(.revokeToken))
    }

    /// The event-log results of a delivery that carried `tokens`: the sink's line per step, with
    /// the tokens each revoking action marked revoked.
    public static func results(_ plan: ActionPlan, delivered: [String], tokens: [TokenToRevoke]) -> JSONValue {
        .array(
            zip(plan.steps, delivered).flatMap { step, result in
                step.actions.map { action -> JSONValue in
                    var line = result
                    if action == .revokeLinkedTokens || action == .revokeToken {
                        let n = tokens.filter { $0.eventIndex == step.eventIndex && $0.action == action }.count
                        line += "; \(n) token\(n == 1 ? "" : "s") marked revoked"
                    }
                    return .object(["action": .string(action.rawValue), "result": .string(line)])
                }
            })
    }
}

extension ActionPlan {
    /// The JSON the webhook receives: what happened, to whom, and what to do. Token identifiers
    /// (a prefix or a hash, never a token) are included so the site can find its token. `issuer`
    /// is the SET's `iss` as it arrived (as `subject.iss` and the event log have it: Google's
    /// `https://accounts.google.com/` keeps its `/`), not the de-duplication scope.
    public func webhookBody(tokenID: String, issuer: String, sentAt: Double, tokens: [TokenToRevoke] = [], appliedByRISC: Bool = false) -> JSONValue {
        var object = JSONObject()
        object["v"] = 1
        if appliedByRISC { object["applied_by_risc"] = true }
        object["jti"] = .string(tokenID)
        object["iss"] = .string(issuer)
        object["event_time"] = .number(eventTime)
        object["sent_at"] = .number(sentAt.rounded())
        object["events"] = .array(
            steps.map { step in
                var event = JSONObject()
                event["type"] = .string(step.type.canonical.uri)
                if let reason = step.reason { event["reason"] = .string(reason) }
                if let state = step.state { event["state"] = .string(state) }
                if let subject = step.subject {
                    var subjectJSON = subject.json.objectValue ?? JSONObject()
                    if case .oauthToken(let identifier) = subject {
                        subjectJSON["token_identifier_length"] = nil
                        subjectJSON["token"] = .string(identifier.token)
                    }
                    event["subject"] = .object(subjectJSON)
                }
                event["actions"] = .array(step.actions.map { .string($0.rawValue) })
                // One entry per token to revoke, by fingerprint: the site's OAuth server finds its own.
                let revoke = tokens.filter { $0.eventIndex == step.eventIndex }
                if !revoke.isEmpty {
                    event["revoke_tokens"] = .array(
                        revoke.map { token in
                            .object([
                                "action": .string(token.action.rawValue), "kind": .string(token.kind.rawValue),
                                "token_identifier_alg": .string(OAuthTokenIdentifier.Algorithm.hashSHA512SHA512.rawValue), "token": .string(token.hash),
                            ])
                        })
                }
                return .object(event)
            })
        return .object(object)
    }
}
