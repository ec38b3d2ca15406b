/// Where actions go when they are not applied to the embedded store: the site's own revocation
/// endpoint. Called on the worker's own thread, so it may block.
public protocol ActionSink: Sendable {
    /// Delivers one SET's plan. Returns a result line per step; throws to have the SET retried.
    /// `idempotencyKey` is the same for every delivery of one SET, from any receiver
    /// (`QueueWorker.idempotencyKey`), for the site to recognise a repeat.
    func deliver(_ plan: ActionPlan, tokenID: String, issuer: String, idempotencyKey: String) throws -> [String]
}

extension ActionPlan {
    /// The JSON the webhook receives: what happened, to whom, and what to do. Token identifiers
    /// (a prefix or a hash, never a token) are included so the site can find its token.
    public func webhookBody(tokenID: String, issuer: String, sentAt: Double) -> JSONValue {
        var object = JSONObject()
        object["v"] = 1
        object["jti"] = .string(tokenID)
        object["iss"] = .string(issuer)
        object["event_time"] = .number(eventTime)
        object["sent_at"] = .number(sentAt.rounded())
        object["events"] = .array(steps.map { step in
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
            return .object(event)
        })
        return .object(object)
    }
}
