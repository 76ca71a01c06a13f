import AuthGateCore
import FoundationEssentials
import Logging

/// Memory-only sessions across a restart of the service (``SessionHandover``).
extension SessionManager {
    /// The sessions of `memory` providers that have tokens, with their refresh schedules.
    func memorySessionsToHandOver() -> [SessionHandover.Entry] {
        sessions.all.filter { $0.value.binding.storage == .memory }.compactMap { key, record in
            record.tokens.map { tokens in
                SessionHandover.Entry(uid: key.uid, session: Self.persisted(key, record, tokens), nextRefreshAt: record.nextRefreshAt)
            }
        }
    }

    /// Takes back sessions handed over by the run before: each whose provider is still there
    /// with the same issuer and client, on its old refresh schedule (or refreshed now when that
    /// has passed). A session the new run already has is kept as it is.
    /// - Returns: How many were taken back.
    func takeHandedOver(_ entries: [SessionHandover.Entry], bindings: [ProviderID: SessionBinding]) -> Int {
        var taken = 0
        var persistent: Set<UInt32> = []
        for entry in entries {
            let session = entry.session
            guard let provider = ProviderID(session.provider), let name = SessionName(session.session), let binding = bindings[provider],
                binding.identity == ProviderIdentity(issuer: session.issuer, clientID: session.clientID), let tokens = session.tokens
            else {
                logger.notice(
                    "handed-over session dropped: its provider is gone or has another issuer or client",
                    metadata: ["peer.uid": "\(entry.uid)", "provider.id": "\(session.provider)", "session": "\(session.session)"]
                )
                continue
            }
            let key = SessionKey(uid: entry.uid, provider: provider, name: name)
            guard sessions[key] == nil else { continue }
            sessions[key] = record(session, tokens: tokens, binding: binding, provider: provider)
            if let at = entry.nextRefreshAt, tokens.isValid(for: 0, at: now()) {
                reschedule(key, at: max(at, now()))
            } else {
                reschedule(key, at: now())
            }
            if binding.storage == .persistent { persistent.insert(key.uid) }
            taken += 1
        }
        persistent.forEach(persist)
        return taken
    }
}
