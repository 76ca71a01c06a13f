import AuthGateCore
import FoundationEssentials
import Logging

/// What `status`, `daemon.info` and `session.inspect` show of the sessions, and their sealed
/// copies on disk.
extension SessionManager {
    // MARK: Status

    /// The sessions of `uid`, or of everyone when `uid` is nil.
    func status(uid: UInt32?, provider: ProviderID?) -> [SessionSummary] {
        let now = now()
        return sessions.all.filter { (uid == nil || $0.key.uid == uid) && (provider == nil || $0.key.provider == provider) }
            .sorted { $0.key < $1.key }
            .map { key, record in
                let state = Self.reportedState(record, at: now)
                // Past its planned time and not started: waiting for a slot at a provider that falls behind.
                let overdue = record.nextRefreshAt.map { now.timeIntervalSince($0) }.flatMap { $0 >= 1 ? Int($0) : nil }
                return SessionSummary(
                    key: key,
                    state: state,
                    expiresAt: record.tokens?.expiresAt,
                    nextRefreshAt: record.nextRefreshAt,
                    lastError: record.lastError,
                    subject: record.subject,
                    displayName: record.displayName,
                    refreshOverdueSeconds: overdue,
                    dpopThumbprint: record.tokens?.proofKey?.thumbprint,
                    notSaved: record.binding.storage == .persistent && record.tokens != nil ? saved.notSaved(uid: key.uid) : nil
                )
            }
    }

    /// What the metrics read of the sessions: how many per provider and state (as `status`
    /// reports them), the refreshes in flight, and the overdue sessions waiting, by provider.
    func metricsSnapshot() -> (states: [String: [SessionState: Int]], inFlight: Int, waiting: [String: Int]) {
        let now = now()
        var states: [String: [SessionState: Int]] = [:]
        for (key, record) in sessions.all {
            states[key.provider.rawValue, default: [:]][Self.reportedState(record, at: now), default: 0] += 1
        }
        let waiting = Dictionary(uniqueKeysWithValues: overdue(at: now).map { ($0.key.rawValue, $0.value.count) })
        return (states, queue.inFlight, waiting)
    }

    /// A session whose token ran out while refreshes fail is `expired`, not `authenticated`.
    static func reportedState(_ record: SessionRecord, at now: Date) -> SessionState {
        guard record.state == .authenticated, let tokens = record.tokens, !tokens.isValid(for: 0, at: now) else { return record.state }
        return .expired
    }

    /// The narrower tokens cached for `key` (bounded by ``maximumVariantsPerSession``).
    func variantCount(for key: SessionKey) -> Int { sessions[key]?.variants.count ?? 0 }

    /// The current tokens of `key`, how and when they were obtained (`session.inspect`).
    func inspection(of key: SessionKey) -> (grant: Grant, tokens: TokenSet, obtainedAt: Date)? {
        guard let record = sessions[key], let tokens = record.tokens else { return nil }
        return (record.grant, tokens, record.obtainedAt)
    }

    /// Whether the session exists, in any state.
    func exists(_ key: SessionKey) -> Bool { sessions[key] != nil }

    /// Whether the session has tokens (it is signed in, though they may need a refresh).
    func hasTokens(_ key: SessionKey) -> Bool { sessions[key]?.tokens != nil }

    func count(uid: UInt32?) -> Int {
        guard let uid else { return sessions.count }
        return sessions.count(uid: uid)
    }

    /// Cancels every refresh in flight; part of the daemon's shutdown.
    func shutdown() {
        isShutDown = true
        for task in refreshes.values { task.cancel() }
        refreshes.removeAll()
    }

    // MARK: Persistence

    /// Takes back the sessions saved before a restart. A session whose provider is gone, is
    /// no longer `persistent`, or now has another issuer or client is dropped, and the file
    /// rewritten without it; one whose provider's file is there but cannot be used now
    /// (`unusable`: invalid, a secret missing) stays on disk, unused until a reload makes the
    /// provider usable (``takeBackHeld(provider:binding:admits:)``). Tokens that expired
    /// meanwhile are refreshed at the first tick.
    /// - Returns: How many sessions were restored.
    @discardableResult
    func restore(_ saved: [UInt32: [PersistedSession]], bindings: [ProviderID: SessionBinding], unusable: Set<ProviderID> = []) -> Int {
        self.saved.allRead()
        var restored = 0
        for (uid, list) in saved {
            self.saved.restored(uid: uid)
            var dropped = false
            for session in list {
                if let provider = ProviderID(session.provider), bindings[provider] == nil, unusable.contains(provider) {
                    self.saved.hold(session, uid: uid)
                    logger.notice(
                        "saved session kept on disk, unused: its provider's file cannot be used now; it comes back when the file is fixed and reloaded",
                        metadata: ["peer.uid": "\(uid)", "provider.id": "\(session.provider)", "session": "\(session.session)"]
                    )
                    continue
                }
                guard let provider = ProviderID(session.provider), let name = SessionName(session.session),
                    let binding = bindings[provider], binding.storage == .persistent,
                    binding.identity == ProviderIdentity(issuer: session.issuer, clientID: session.clientID),
                    let tokens = session.tokens
                else {
                    dropped = true
                    logger.notice(
                        "saved session dropped: its provider is gone, no longer persistent, or has another issuer or client (or its DPoP key is unreadable)",
                        metadata: ["peer.uid": "\(uid)", "provider.id": "\(session.provider)", "session": "\(session.session)"]
                    )
                    continue
                }
                let key = SessionKey(uid: uid, provider: provider, name: name)
                // Taken back late (a reload): a session signed in since stays.
                guard sessions[key] == nil else { continue }
                sessions[key] = record(session, tokens: tokens, binding: binding, provider: provider)
                if tokens.isValid(for: 0, at: now()) {
                    planRefresh(key)
                } else {
                    reschedule(key, at: now())
                }
                restored += 1
            }
            if dropped { persist(uid) }
        }
        return restored
    }

    /// A reload made `provider` usable (`binding`), or removed it (`nil`): the saved sessions
    /// kept on disk for it come back as at a restart (those its `access` still admits, of the
    /// same issuer and client, still `persistent`), or are dropped.
    /// - Returns: How many came back.
    @discardableResult
    func takeBackHeld(provider: ProviderID, binding: SessionBinding?, admits: (UInt32) -> Bool = { _ in true }) -> Int {
        let released = saved.release(provider: provider.rawValue)
        var restored = 0
        for (uid, list) in released {
            if let binding, admits(uid) { restored += restore([uid: list], bindings: [provider: binding]) }
            persist(uid)
        }
        return restored
    }

    /// Writes the uid's `persistent` sessions (the whole list: one sealed file per uid).
    /// Synchronous on purpose: nothing else in this actor runs until the file is on disk, so
    /// a caller never holds a token whose refresh token the disk does not know.
    func persist(_ uid: UInt32) {
        guard saved.saves else { return }
        let kept = sessions.all.filter { $0.key.uid == uid && $0.value.binding.storage == .persistent }
            .compactMap { key, record in record.tokens.map { (key, record, $0) } }
        saved.save(kept.sorted { $0.0 < $1.0 }.map { key, record, tokens in Self.persisted(key, record, tokens) }, uid: uid)
    }

    /// A session as it is saved (a sealed file) or handed over (systemd's descriptor store).
    /// `savedAt` carries when the tokens arrived, which the next refresh is planned from.
    static func persisted(_ key: SessionKey, _ record: SessionRecord, _ tokens: TokenSet) -> PersistedSession {
        PersistedSession(
            provider: key.provider.rawValue,
            session: key.name.rawValue,
            grant: record.grant,
            subject: record.subject,
            displayName: record.displayName,
            issuer: record.binding.identity.issuer,
            clientID: record.binding.identity.clientID,
            tokens: tokens,
            savedAt: record.obtainedAt,
            asksConsent: record.asksConsent ? true : nil
        )
    }

    /// The record of a session taken back (from its sealed file, or from the run before).
    func record(_ session: PersistedSession, tokens: TokenSet, binding: SessionBinding, provider: ProviderID) -> SessionRecord {
        SessionRecord(
            grant: session.grant,
            tokens: tokens,
            subject: session.subject,
            displayName: session.displayName,
            state: .authenticated,
            generation: takeGeneration(),
            binding: shared(binding, for: provider),
            obtainedAt: session.savedAt,
            asksConsent: session.asksConsent ?? false
        )
    }
}
