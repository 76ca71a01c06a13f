import AuthGateCore
import AuthGateServer
import FoundationEssentials
import Logging
import NIOCore

/// Owns every session and every refresh in flight.
///
/// A refresh runs at most once per session and variant at a time (single flight): callers
/// who need the same one await the same task, which this actor owns and cancels on shutdown.
/// Refreshes of one session's variants run one after another, because each may spend and
/// rotate the session's single refresh token.
///
/// Background refresh: each session carries a `nextRefreshAt` (see ``RefreshSchedule``), kept
/// in a ``RefreshQueue``. ``RefreshScheduler`` sleeps until the earliest planned time (woken
/// when an earlier one is planned) and calls ``refreshDue()``; every refresh that finishes
/// calls it too, so a freed slot is taken at once and the only bound is on refreshes in flight.
actor SessionManager {
    /// Every session manager runs on the sessions' thread, whatever task calls it
    /// (``SessionStore/thread``: its saves must not stall an event loop that serves connections).
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        SessionStore.thread.executor.asUnownedSerialExecutor()
    }

    struct RefreshKey: Hashable {
        var session: SessionKey
        var variant: TokenVariant
    }

    var sessions: SessionTable
    /// The most sessions a bounded uid may hold, with the room the sign-ins under way hold.
    var room: SessionRoom
    var refreshes: [RefreshKey: Task<Result<TokenSet, AuthGateError>, Never>] = [:]
    var queue: RefreshQueue
    var lateness = RefreshLateness()
    /// When ``RefreshScheduler`` looks next (`nil`: when woken), and how to wake it sooner.
    var schedulerWakesAt: Date?
    var wakeScheduler: (@Sendable () -> Void)?
    /// When providers' backlogs are looked at and warned about.
    var backlogWarnings = BacklogWarnings()
    /// Providers that asked, with a `Retry-After`, to be left alone for a while.
    var providerPauses = ProviderPauses()
    /// The sessions obtained with a platform token file, and when their files are looked at.
    var platformTokens = PlatformTokenChecks()
    var isShutDown = false
    var nextGeneration: UInt64 = 1
    /// The binding in use per provider, which every new record of the provider shares when
    /// it is interchangeable with the one a sign-in brings (``shared(_:for:)``).
    var bindings: [ProviderID: SessionBinding] = [:]
    /// Provider clients a reload replaced or removed, with when (``retire(_:)``): a sign-in
    /// made with one stores no session. Held alive, so that no new client can take the
    /// identity of an old one, for ``retiredClientMemory``.
    var retiredClients: [ObjectIdentifier: (client: AnyObject, at: Date)] = [:]
    /// Longer than any sign-in takes (an interactive one ends after 10 minutes).
    static let retiredClientMemory: TimeInterval = 900
    let now: @Sendable () -> Date
    let random: @Sendable () -> Double
    let logger: Logger
    /// Where refreshes and session-store writes are counted; `nil` in tests that need none.
    nonisolated let metrics: (any SessionWorkObserver)?
    /// The `persistent` sessions' sealed files.
    var saved: SavedSessions
    /// Narrower tokens cached per session; a new one beyond it replaces the one expiring first.
    static let maximumVariantsPerSession = 16
    /// Refreshes one bounded uid's calls may have at providers at once (of the 16 HTTP threads).
    static let maximumCallerRefreshesPerUser = 4
    /// Refreshes a bounded uid may force (`force_refresh`, `token.rejected`) of one provider's
    /// sessions: 10, then one every 5 s — a program told its token no longer works asks a few
    /// times, while one forcing refreshes in a loop would drive the shared client into the
    /// provider's throttling, for every user.
    var forcedRefreshes = RateBuckets<UserProvider>(burst: 10, perSecond: 0.2)

    /// - Parameters:
    ///   - maximumSessionsPerUser: Sessions a bounded uid may hold (see
    ///     ``PeerCredentials/isUnbounded``); `authgated --max-sessions-per-user`.
    ///   - refreshLimits: Refreshes in flight at once, in all and per provider, so that a daemon
    ///     restored with thousands of expired sessions does not open thousands of connections.
    ///   - now: The clock; injected by tests.
    ///   - observer: Told of every change of a session's tokens (the published answers and watches).
    ///   - random: Numbers in `0..<1` for the jitter; injected by tests.
    init(
        logger: Logger,
        persistence: SessionPersistence? = nil,
        refreshLimits: RefreshQueue.Limits = .standard,
        maximumSessionsPerUser: Int = 1000,
        metrics: (any SessionWorkObserver)? = nil,
        observer: any SessionObserver = NoSessionObserver(),
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.logger = logger
        self.metrics = metrics
        saved = SavedSessions(persistence: persistence, metrics: metrics, logger: logger)
        queue = RefreshQueue(limits: refreshLimits)
        room = SessionRoom(maximumPerUser: maximumSessionsPerUser)
        self.now = now
        self.random = random
        sessions = SessionTable(observer: observer)
    }

    // MARK: Sign-in and sign-out

    /// Throws `rate_limited` when `key` is a new session of a uid that holds its most already,
    /// counting the new sessions whose sign-ins are under way (``reserveRoom(for:)``); asked
    /// before a sign-in reaches the provider. Replacing a session is always allowed.
    func ensureRoom(for key: SessionKey) throws(AuthGateError) {
        try room.ensure(for: key, exists: sessions[key] != nil, held: sessions.count(uid: key.uid))
    }

    /// ``ensureRoom(for:)``, and the room held for `key` until ``releaseRoom(for:)``: sign-ins
    /// under way at once cannot together pass the limit.
    func reserveRoom(for key: SessionKey) throws(AuthGateError) {
        try room.reserve(for: key, exists: sessions[key] != nil, held: sessions.count(uid: key.uid))
    }

    /// The sign-in that reserved room for `key` ended (its session stored, or not).
    func releaseRoom(for key: SessionKey) {
        room.release(key)
    }

    /// Stores a fresh sign-in, replacing any session of the same key.
    /// - Parameter consent: What becomes of the session's consent choice.
    /// - Returns: The result for the caller, and the replaced tokens (to revoke).
    func store(
        _ signIn: SignInResult,
        grant: Grant,
        binding: SessionBinding,
        for key: SessionKey,
        consent: ConsentChoice = .keep
    ) -> (SignedInSession, replaced: TokenSet?) {
        let previous = sessions[key]
        cancelRefreshes(of: key)
        let obtainedAt = now()
        let binding = shared(binding, for: key.provider)
        sessions[key] = SessionRecord(
            grant: grant,
            tokens: signIn.tokens,
            subject: signIn.subject,
            displayName: signIn.displayName,
            state: .authenticated,
            generation: takeGeneration(),
            binding: binding,
            obtainedAt: obtainedAt,
            platformRevision: binding.client.platformTokenRevision(for: grant),
            asksConsent: consent.applied(to: previous?.asksConsent ?? false)
        )
        if previous?.asksConsent == true, sessions[key]?.asksConsent == false {
            logger.notice("consent switched off by a sign-in: programs get the session's tokens unasked", metadata: key.logMetadata())
        }
        if sessions[key]?.platformRevision != nil { platformTokens.watch(key) }
        planRefresh(key)
        if binding.storage == .persistent || previous?.binding.storage == .persistent { persist(key.uid) }
        let replaced = previous?.tokens
        let result = SignedInSession(
            key: key,
            state: .authenticated,
            expiresAt: signIn.tokens.expiresAt,
            subject: signIn.subject,
            displayName: signIn.displayName,
            notSaved: binding.storage == .persistent ? saved.notSaved(uid: key.uid) : nil
        )
        return (result, replaced)
    }

    /// A reload replaced or removed the provider whose client this was.
    func retire(_ client: any IdentityProvider) {
        let now = now()
        retiredClients = retiredClients.filter { now.timeIntervalSince($0.value.at) < Self.retiredClientMemory }
        guard let identity = Self.identity(of: client) else { return }
        retiredClients[identity] = (client as AnyObject, now)
    }

    /// A client object's identity; `nil` for a client that is a value (a test's), which has
    /// none to remember.
    private static func identity(of client: any IdentityProvider) -> ObjectIdentifier? {
        type(of: client as Any) is AnyObject.Type ? ObjectIdentifier(client as AnyObject) : nil
    }

    /// ``store(_:grant:binding:for:consent:)``, unless the sign-in was made with a client a
    /// reload has replaced since (it began before an admin narrowed `access`, removed the
    /// provider or changed its issuer or client).
    /// - Throws: `login_cancelled`, saying why; the caller revokes the tokens.
    func storeUnlessRetired(
        _ signIn: SignInResult,
        grant: Grant,
        binding: SessionBinding,
        for key: SessionKey,
        consent: ConsentChoice = .keep
    ) throws(AuthGateError) -> (SignedInSession, replaced: TokenSet?) {
        if let identity = Self.identity(of: binding.client), retiredClients[identity] != nil {
            logger.notice("sign-in not stored: its provider was changed or removed while it was under way", metadata: key.logMetadata())
            throw AuthGateError(
                .loginCancelled,
                "The provider '\(key.provider)' was changed by an administrator while you signed in; the sign-in was not kept: sign in again."
            )
        }
        return store(signIn, grant: grant, binding: binding, for: key, consent: consent)
    }

    /// `binding`, or the provider's binding in use when the two are interchangeable: one object
    /// for all of a provider's sessions, not one per sign-in.
    func shared(_ binding: SessionBinding, for provider: ProviderID) -> SessionBinding {
        if let known = bindings[provider], known.isInterchangeable(with: binding) { return known }
        bindings[provider] = binding
        return binding
    }

    /// The session's user chose consent (`login --confirm`) for a session that exists: it asks
    /// from now on, whatever becomes of the sign-in that asked.
    /// - Returns: Whether there is such a session.
    @discardableResult
    func askConsent(_ key: SessionKey) -> Bool {
        guard let record = sessions[key] else { return false }
        guard !record.asksConsent else { return true }
        sessions[key]?.asksConsent = true
        if record.binding.storage == .persistent { persist(key.uid) }
        return true
    }

    /// Whether the session asks consent because its user chose so.
    func asksConsent(_ key: SessionKey) -> Bool { sessions[key]?.asksConsent ?? false }

    /// Removes a session.
    /// - Returns: Its tokens, to revoke at the provider; `nil` when there was none.
    func remove(_ key: SessionKey) -> TokenSet?? {
        cancelRefreshes(of: key)
        guard let record = sessions.removeValue(forKey: key) else { return nil }
        if record.binding.storage == .persistent { persist(key.uid) }
        return .some(record.tokens)
    }

    /// Signs out every session of a provider that a reload removed.
    /// - Returns: Their tokens, with the client to revoke them with.
    func removeAll(provider: ProviderID) -> [(TokenSet, any IdentityProvider)] {
        var ended: [(TokenSet, any IdentityProvider)] = []
        var uids: Set<UInt32> = []
        bindings[provider] = nil
        for (key, record) in sessions.all where key.provider == provider {
            cancelRefreshes(of: key)
            sessions[key] = nil
            if let tokens = record.tokens { ended.append((tokens, record.binding.client)) }
            if record.binding.storage == .persistent { uids.insert(key.uid) }
            logger.info("signed out: the provider was removed", metadata: key.logMetadata())
        }
        uids.forEach(persist)
        return ended
    }

    /// A reload changed a provider: its sessions move to the new client and rules when the
    /// issuer and client are the same, and are signed out otherwise; so are the sessions of
    /// users the provider's `access` no longer admits (``AccessPolicy/admitsUser(uid:_:)``).
    /// - Returns: The signed-out sessions' tokens, with the client to revoke them with.
    func rebind(
        provider: ProviderID,
        to binding: SessionBinding,
        admits: (UInt32) -> Bool = { _ in true }
    ) -> [(TokenSet, any IdentityProvider)] {
        var ended: [(TokenSet, any IdentityProvider)] = []
        var uids: Set<UInt32> = []
        var admitted: [UInt32: Bool] = [:]
        let binding = shared(binding, for: provider)
        for (key, record) in sessions.all where key.provider == provider {
            if record.binding.storage == .persistent || binding.storage == .persistent { uids.insert(key.uid) }
            let isAdmitted = admitted[key.uid] ?? admits(key.uid)
            admitted[key.uid] = isAdmitted
            if !isAdmitted {
                cancelRefreshes(of: key)
                sessions.removeValue(
                    forKey: key,
                    ending: .accessRevoked,
                    message: "You may no longer use the provider '\(provider)': an administrator narrowed its access, and the session was signed out."
                )
                if let tokens = record.tokens { ended.append((tokens, record.binding.client)) }
                logger.notice("signed out: the provider's access no longer admits the session's user", metadata: key.logMetadata())
                continue
            }
            if record.binding.identity == binding.identity {
                sessions[key]?.binding = binding
                continue
            }
            cancelRefreshes(of: key)
            sessions[key] = nil
            if let tokens = record.tokens { ended.append((tokens, record.binding.client)) }
            logger.info("signed out: the provider now has another issuer or client", metadata: key.logMetadata())
        }
        uids.forEach(persist)
        return ended
    }

    // MARK: Tokens

    /// A token valid for at least `minimumValidity` seconds, refreshed first when needed.
    /// - Parameter variant: Narrower scopes or a resource; empty for the session's own token.
    /// - Throws: `login_required` when there is no usable session; the provider's error when a
    ///   needed refresh failed and the current token has expired.
    ///
    /// A minimum validity that a token fresh from the provider does not meet (its lifetime is
    /// shorter) is from then on met as ``MinimumValidity`` says (the session's own token only),
    /// and logged once per session and minimum.
    /// - Parameter bounded: The caller is bound by ``maximumCallerRefreshesPerUser``.
    /// - Parameter caller: Who asks, for that log line.
    func token(
        for key: SessionKey,
        minimumValidity: TimeInterval,
        forceRefresh: Bool,
        variant: TokenVariant = TokenVariant(),
        bounded: Bool = false,
        caller: PeerCredentials? = nil
    ) async throws(AuthGateError) -> TokenSet {
        guard let record = sessions[key], let tokens = record.tokens else {
            throw .loginRequired(provider: key.provider.rawValue)
        }
        let needsRefresh: Bool
        if variant.isEmpty {
            // A minimum the provider's tokens were found not to meet (after a refresh for it) is
            // met as MinimumValidity says; any other exactly.
            let served =
                record.unmeetableMinimums.contains(Int(minimumValidity))
                ? tokens.serves(minimumValidity: minimumValidity, obtainedAt: record.obtainedAt, at: now())
                : tokens.isValid(for: minimumValidity, at: now())
            needsRefresh = forceRefresh || !served
        } else {
            needsRefresh = forceRefresh || !(record.variants[variant]?.isValid(for: minimumValidity, at: now()) ?? false)
        }
        // One uid's calls must not hold every provider thread: a new refresh beyond its share
        // is refused (joining one in flight is free).
        if bounded, needsRefresh, refreshes[RefreshKey(session: key, variant: variant)] == nil,
            refreshes.keys.count(where: { $0.session.uid == key.uid }) >= Self.maximumCallerRefreshesPerUser
        {
            throw AuthGateError(
                .rateLimited,
                "You have \(Self.maximumCallerRefreshesPerUser) refreshes at providers already; try again in a moment.",
                retryAfterSeconds: 1
            )
        }
        // A provider that asked to be left alone (Retry-After) is sent no caller's refresh either
        // until then: a token still valid is served, else the caller learns when to come back.
        // Otherwise one uid forcing refreshes in a loop would keep the provider throttling, and
        // every other session's refreshes deferred.
        if needsRefresh, let seconds = providerPauses.remaining(of: key.provider, at: now()) {
            let current = variant.isEmpty ? tokens : record.variants[variant]
            if !forceRefresh, let current, current.isValid(for: 0, at: now()) { return current }
            throw AuthGateError(
                .serviceUnavailable,
                "\(key.provider) is throttling this daemon's requests and asked for none for \(seconds) s more; try again then.",
                retryAfterSeconds: seconds
            )
        }
        if bounded, forceRefresh, refreshes[RefreshKey(session: key, variant: variant)] == nil,
            let wait = forcedRefreshes.take(UserProvider(uid: key.uid, provider: key.provider), at: now())
        {
            throw AuthGateError(
                .rateLimited,
                "You forced too many refreshes of \(key.provider) tokens in a short time; try again in \(wait) s.",
                retryAfterSeconds: wait
            )
        }
        if !variant.isEmpty {
            return try await variantToken(for: key, record: record, minimumValidity: minimumValidity, forceRefresh: forceRefresh, variant: variant)
        }
        if !needsRefresh {
            // Already on disk when persistent: a refresh persists before it returns.
            sessions.observer.publish(tokens, obtainedAt: record.obtainedAt, unmeetable: sessions[key]?.unmeetableMinimums ?? [], for: key)
            return tokens
        }
        if !record.grant.isService, tokens.refreshToken == nil {
            if tokens.isValid(for: 0, at: now()) { return tokens }
            expireWithoutRefreshToken(key)
            throw .loginRequired(provider: key.provider.rawValue)
        }
        switch await refresh(key, variant: variant).value {
        case .success(let refreshed):
            noteUnmeetable(minimumValidity, of: key, caller: caller)
            return refreshed
        case .failure(let error) where error.reason != .loginRequired && !forceRefresh:
            // The provider is unwell, but the current token may still work: serve it until it
            // expires. Not to a caller who forced the refresh (`force_refresh`, `token.rejected`):
            // that caller was just told this token no longer works.
            if let current = sessions[key]?.tokens, current.isValid(for: 0, at: now()) { return current }
            throw error
        case .failure(let error):
            throw error
        }
    }

    /// After a refresh for a caller asking `minimumValidity`: when the new token's lifetime
    /// cannot meet it, notes it (``MinimumValidity`` serves it from then on, the published
    /// answers too) and logs it, once per session and minimum.
    private func noteUnmeetable(_ minimumValidity: TimeInterval, of key: SessionKey, caller: PeerCredentials?) {
        guard let record = sessions[key], let tokens = record.tokens else { return }
        let lifetime = tokens.expiresAt.timeIntervalSince(record.obtainedAt)
        let asked = Int(minimumValidity)
        guard !tokens.isValid(for: minimumValidity, at: now()), MinimumValidity.isUnmeetable(asked: minimumValidity, lifetime: lifetime),
            !record.unmeetableMinimums.contains(asked),
            record.unmeetableMinimums.count < SessionRecord.maximumUnmeetableNotes
        else { return }
        sessions[key]?.unmeetableMinimums.insert(asked)
        logger.notice(
            "a caller asks a minimum validity the provider's tokens do not have: served tokens younger than half their lifetime",
            metadata: key.logMetadata([
                "token.min_valid_seconds": "\(asked)", "token.lifetime_seconds": "\(Int(lifetime.rounded()))",
                "peer.pid": "\(caller.map { "\($0.pid)" } ?? "-")", "peer.program": "\(caller?.programName ?? "-")",
            ])
        )
    }

    func variantToken(
        for key: SessionKey,
        record: SessionRecord,
        minimumValidity: TimeInterval,
        forceRefresh: Bool,
        variant: TokenVariant
    ) async throws(AuthGateError) -> TokenSet {
        if !forceRefresh, let cached = record.variants[variant], cached.isValid(for: minimumValidity, at: now()) {
            return cached
        }
        if variant.exchange != nil {
            // The subject token must itself stay valid while it is exchanged.
            _ = try await token(for: key, minimumValidity: 30, forceRefresh: false)
            return try await refresh(key, variant: variant).value.get()
        }
        guard record.grant.isService || record.tokens?.refreshToken != nil else {
            throw AuthGateError(
                .unsupportedGrant,
                "The provider '\(key.provider)' issued this session no refresh token, so authgated cannot obtain a token with other scopes or for a resource; sign in again asking for them."
            )
        }
        return try await refresh(key, variant: variant).value.get()
    }

    /// The key `key`'s tokens are bound to (DPoP), and the token a proof's `ath` hashes:
    /// `presented` when it is the session's own or one of its variants', else the session's
    /// current token (refreshed first when it has under 10 s to live).
    /// - Throws: `unsupported_grant` when the session's tokens are not DPoP-bound;
    ///   `invalid_params` when `presented` is not one of this session's tokens.
    func proofKey(for key: SessionKey, presenting presented: Secret?, bounded: Bool) async throws(AuthGateError) -> (DPoPKey, Secret) {
        let tokens = try await token(for: key, minimumValidity: 10, forceRefresh: false, bounded: bounded)
        guard let proofKey = tokens.proofKey else {
            throw AuthGateError(
                .unsupportedGrant,
                "The session's tokens with '\(key.provider)' are Bearer tokens, not bound to a key: DPoP proofs are for providers whose file sets \"dpop\": \"required\"."
            )
        }
        guard let presented else { return (proofKey, tokens.accessToken) }
        let known = [tokens] + (sessions[key]?.variants.values.map { $0 } ?? [])
        guard known.contains(where: { $0.proofKey == proofKey && $0.accessToken.constantTimeEquals(presented.exposedValue) }) else {
            throw AuthGateError(
                .invalidParams,
                "access_token is not a current token of this session.",
                fields: [FieldError(field: "access_token", message: "not a current token of this session")]
            )
        }
        return (proofKey, presented)
    }

    /// A caller's API refused `rejected`. If it is still the current token, the session is
    /// refreshed (joining a refresh already in flight); if it was already replaced, the
    /// current token is returned without asking the provider.
    func tokenRejected(for key: SessionKey, rejected: Secret, bounded: Bool = false) async throws(AuthGateError) -> TokenSet {
        guard let tokens = sessions[key]?.tokens else { throw .loginRequired(provider: key.provider.rawValue) }
        guard tokens.accessToken == rejected else { return tokens }
        return try await token(for: key, minimumValidity: 0, forceRefresh: true, bounded: bounded)
    }
}
