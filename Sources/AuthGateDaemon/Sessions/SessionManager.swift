import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Logging

/// A session's identity: whose, at which provider, under which name.
///
/// The uid comes from the socket's peer credentials, so one uid never reaches another's
/// sessions whatever it sends.
struct SessionKey: Sendable, Hashable, Comparable {
    var uid: UInt32
    var provider: ProviderID
    var name: SessionName

    static func < (lhs: SessionKey, rhs: SessionKey) -> Bool {
        (lhs.uid, lhs.provider, lhs.name) < (rhs.uid, rhs.provider, rhs.name)
    }
}

/// Who issued a session's tokens: a session is only kept (across a reload or a restart) by a
/// provider with the same issuer and client.
struct ProviderIdentity: Sendable, Hashable {
    var issuer: String?
    var clientID: String?

    init(issuer: String?, clientID: String?) {
        self.issuer = issuer
        self.clientID = clientID
    }

    init(_ configuration: ProviderConfiguration) {
        switch configuration.settings {
        case .oidc(let remote), .oauth2(let remote):
            self.init(issuer: remote.issuer?.absoluteString ?? remote.endpoints.token?.absoluteString, clientID: remote.clientID)
        case .mock:
            self.init(issuer: nil, clientID: nil)
        }
    }
}

/// What a session needs from its provider: the client that refreshes it and the rules it
/// follows. Replaced when a reload changes the provider in a way that keeps its sessions.
struct SessionBinding: Sendable {
    var client: any IdentityProvider
    var policy: RefreshPolicy
    var storage: ProviderConfiguration.Storage
    var identity: ProviderIdentity

    init(client: any IdentityProvider, policy: RefreshPolicy, storage: ProviderConfiguration.Storage,
         identity: ProviderIdentity = ProviderIdentity(issuer: nil, clientID: nil)) {
        self.client = client
        self.policy = policy
        self.storage = storage
        self.identity = identity
    }

    init(_ configuration: ProviderConfiguration, client: any IdentityProvider) {
        self.init(client: client, policy: configuration.refresh, storage: configuration.storage, identity: ProviderIdentity(configuration))
    }
}

/// One session's state; never leaves the daemon.
struct SessionRecord: Sendable {
    /// How the session was obtained: `client_credentials` sessions re-acquire instead of refreshing.
    var grant: Grant
    var tokens: TokenSet?
    var subject: String?
    var state: SessionState
    var lastError: String?
    /// Changes whenever the session is replaced or removed, so a refresh that finishes late
    /// cannot overwrite a newer sign-in.
    var generation: UInt64
    var binding: SessionBinding
    /// When the current tokens arrived; their lifetime decides the next refresh.
    var obtainedAt: Date
    /// When the scheduler refreshes (or retries, or expires) the session next.
    var nextRefreshAt: Date?
    /// Transient refresh failures in a row, for the backoff.
    var failures = 0
    /// Narrower tokens obtained for `token` calls with `scopes` or `resource`.
    var variants: [TokenVariant: TokenSet] = [:]
}

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
    private struct RefreshKey: Hashable {
        var session: SessionKey
        var variant: TokenVariant
    }

    private var sessions: SessionTable
    /// The current tokens of sessions in use, for answering `token` on the event loops.
    nonisolated let published: PublishedTokens
    /// The `token.watch` subscriptions, told of every change by ``SessionTable``.
    nonisolated let watchers = TokenWatchers()
    private var refreshes: [RefreshKey: Task<Result<TokenSet, AuthGateError>, Never>] = [:]
    private var queue: RefreshQueue
    private var lateness = RefreshLateness()
    /// When ``RefreshScheduler`` looks next (`nil`: when woken), and how to wake it sooner.
    private var schedulerWakesAt: Date?
    private var wakeScheduler: (@Sendable () -> Void)?
    /// When the backlog warning was last logged, per provider.
    private var backlogWarnedAt: [ProviderID: Date] = [:]
    private var backlogCheckedAt: Date?
    private var isShutDown = false
    private var nextGeneration: UInt64 = 1
    private let now: @Sendable () -> Date
    private let random: @Sendable () -> Double
    private let logger: Logger
    /// Where refreshes and session-store writes are counted; `nil` in tests that need none.
    nonisolated let metrics: DaemonMetrics?
    /// Where `persistent` sessions are sealed; `nil` keeps everything in memory.
    private let persistence: SessionPersistence?
    /// The uids that have a sessions file, so that the last persistent session's removal
    /// deletes it, and memory-only uids never cause a disk access.
    private var persistedUIDs: Set<UInt32> = []
    /// How long a provider's backlog is warned about once.
    static let backlogWarningInterval: TimeInterval = 60
    /// Narrower tokens cached per session; a new one beyond it replaces the one expiring first.
    static let maximumVariantsPerSession = 16
    /// Refreshes one bounded uid's calls may have at providers at once (of the 16 HTTP threads).
    static let maximumCallerRefreshesPerUser = 4
    /// Sessions a bounded uid may hold (see ``PeerCredentials/isUnbounded``); `authgated
    /// --max-sessions-per-user`.
    let maximumSessionsPerUser: Int

    /// - Parameters:
    ///   - refreshLimits: Refreshes in flight at once, in all and per provider, so that a daemon
    ///     restored with thousands of expired sessions does not open thousands of connections.
    ///   - now: The clock; injected by tests.
    ///   - random: Numbers in `0..<1` for the jitter; injected by tests.
    init(logger: Logger, persistence: SessionPersistence? = nil, refreshLimits: RefreshQueue.Limits = .standard, maximumSessionsPerUser: Int = 1000,
         metrics: DaemonMetrics? = nil,
         now: @escaping @Sendable () -> Date = { Date() }, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.logger = logger
        self.metrics = metrics
        self.persistence = persistence
        queue = RefreshQueue(limits: refreshLimits)
        self.maximumSessionsPerUser = maximumSessionsPerUser
        self.now = now
        self.random = random
        published = PublishedTokens(now: now)
        sessions = SessionTable(published: published, watchers: watchers)
    }

    // MARK: Sign-in and sign-out

    /// Throws `rate_limited` when `key` is a new session of a uid that holds its most already;
    /// asked before a sign-in reaches the provider. Replacing a session is always allowed.
    func ensureRoom(for key: SessionKey) throws(AuthGateError) {
        guard sessions[key] == nil, sessions.count(uid: key.uid) >= maximumSessionsPerUser else { return }
        throw AuthGateError(.rateLimited, "You have \(maximumSessionsPerUser) sessions, the most one user may hold; sign out of some (authgate logout) first.")
    }

    /// Stores a fresh sign-in, replacing any session of the same key.
    /// - Returns: The result for the caller, and the replaced tokens (to revoke).
    func store(_ signIn: SignInResult, grant: Grant, binding: SessionBinding, for key: SessionKey) -> (LoginResult, replaced: TokenSet?) {
        let previous = sessions[key]
        cancelRefreshes(of: key)
        let obtainedAt = now()
        sessions[key] = SessionRecord(grant: grant, tokens: signIn.tokens, subject: signIn.subject, state: .authenticated,
                                      lastError: nil, generation: takeGeneration(), binding: binding, obtainedAt: obtainedAt)
        planRefresh(key)
        if binding.storage == .persistent || previous?.binding.storage == .persistent { persist(key.uid) }
        let replaced = previous?.tokens
        let result = LoginResult(provider: key.provider.rawValue, session: key.name.rawValue, state: .authenticated,
                                 expiresAt: signIn.tokens.expiresAt, subject: signIn.subject, displayName: signIn.displayName)
        return (result, replaced)
    }

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
        for (key, record) in sessions.all where key.provider == provider {
            cancelRefreshes(of: key)
            sessions[key] = nil
            if let tokens = record.tokens { ended.append((tokens, record.binding.client)) }
            if record.binding.storage == .persistent { uids.insert(key.uid) }
            logger.info("signed out: the provider was removed", metadata: metadata(key))
        }
        uids.forEach(persist)
        return ended
    }

    /// A reload changed a provider: its sessions move to the new client and rules when the
    /// issuer and client are the same, and are signed out otherwise.
    /// - Returns: The signed-out sessions' tokens, with the client to revoke them with.
    func rebind(provider: ProviderID, to binding: SessionBinding) -> [(TokenSet, any IdentityProvider)] {
        var ended: [(TokenSet, any IdentityProvider)] = []
        var uids: Set<UInt32> = []
        for (key, record) in sessions.all where key.provider == provider {
            if record.binding.storage == .persistent || binding.storage == .persistent { uids.insert(key.uid) }
            if record.binding.identity == binding.identity {
                sessions[key]?.binding = binding
                continue
            }
            cancelRefreshes(of: key)
            sessions[key] = nil
            if let tokens = record.tokens { ended.append((tokens, record.binding.client)) }
            logger.info("signed out: the provider now has another issuer or client", metadata: metadata(key))
        }
        uids.forEach(persist)
        return ended
    }

    // MARK: Tokens

    /// A token valid for at least `minimumValidity` seconds, refreshed first when needed.
    /// - Parameter variant: Narrower scopes or a resource; empty for the session's own token.
    /// - Throws: `login_required` when there is no usable session; the provider's error when a
    ///   needed refresh failed and the current token has expired.
    /// - Parameter bounded: The caller is bound by ``maximumCallerRefreshesPerUser``.
    func token(for key: SessionKey, minimumValidity: TimeInterval, forceRefresh: Bool,
               variant: TokenVariant = TokenVariant(), bounded: Bool = false) async throws(AuthGateError) -> TokenSet {
        guard let record = sessions[key], let tokens = record.tokens else {
            throw .loginRequired(provider: key.provider.rawValue)
        }
        let current = variant.isEmpty ? tokens : record.variants[variant]
        let needsRefresh = forceRefresh || !(current?.isValid(for: minimumValidity, at: now()) ?? false)
        // One uid's calls must not hold every provider thread: a new refresh beyond its share
        // is refused (joining one in flight is free).
        if bounded, needsRefresh, refreshes[RefreshKey(session: key, variant: variant)] == nil,
           refreshes.keys.count(where: { $0.session.uid == key.uid }) >= Self.maximumCallerRefreshesPerUser {
            throw AuthGateError(.rateLimited, "You have \(Self.maximumCallerRefreshesPerUser) refreshes at providers already; try again in a moment.",
                                retryAfterSeconds: 1)
        }
        if !variant.isEmpty {
            return try await variantToken(for: key, record: record, minimumValidity: minimumValidity, forceRefresh: forceRefresh, variant: variant)
        }
        if !forceRefresh, tokens.isValid(for: minimumValidity, at: now()) {
            // Already on disk when persistent: a refresh persists before it returns.
            sessions.published.publish(tokens, for: key)
            return tokens
        }
        if record.grant != .clientCredentials, tokens.refreshToken == nil {
            if tokens.isValid(for: 0, at: now()) { return tokens }
            expireWithoutRefreshToken(key)
            throw .loginRequired(provider: key.provider.rawValue)
        }
        switch await refresh(key, variant: variant).value {
        case .success(let refreshed):
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

    private func variantToken(for key: SessionKey, record: SessionRecord, minimumValidity: TimeInterval, forceRefresh: Bool,
                              variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        if !forceRefresh, let cached = record.variants[variant], cached.isValid(for: minimumValidity, at: now()) {
            return cached
        }
        guard record.grant == .clientCredentials || record.tokens?.refreshToken != nil else {
            throw AuthGateError(.unsupportedGrant, "The provider '\(key.provider)' issued this session no refresh token, so authgated cannot obtain a token with other scopes or for a resource; sign in again asking for them.")
        }
        return try await refresh(key, variant: variant).value.get()
    }

    /// A caller's API refused `rejected`. If it is still the current token, the session is
    /// refreshed (joining a refresh already in flight); if it was already replaced, the
    /// current token is returned without asking the provider.
    func tokenRejected(for key: SessionKey, rejected: Secret, bounded: Bool = false) async throws(AuthGateError) -> TokenSet {
        guard let tokens = sessions[key]?.tokens else { throw .loginRequired(provider: key.provider.rawValue) }
        guard tokens.accessToken == rejected else { return tokens }
        return try await token(for: key, minimumValidity: 0, forceRefresh: true, bounded: bounded)
    }

    // MARK: Background refresh

    /// Starts the refreshes that are due while slots are free (see ``RefreshQueue``), and ends
    /// sessions that expired without a refresh token. Called by ``RefreshScheduler`` when the
    /// earliest planned time comes, and after every refresh (a freed slot).
    /// - Returns: How many refreshes it started.
    @discardableResult
    func refreshDue() -> Int {
        guard !isShutDown else { return 0 }
        let now = now()
        var started = 0
        while let start = queue.next(now: now, current: { key, plannedAt in
            guard let record = sessions[key], record.nextRefreshAt == plannedAt else { return nil }
            return record.tokens?.expiresAt
        }) {
            guard let record = sessions[start.key], let tokens = record.tokens else { continue }
            sessions[start.key]?.nextRefreshAt = nil
            if refreshes[RefreshKey(session: start.key, variant: TokenVariant())] != nil { continue }  // a caller's refresh plans the next one
            if record.grant != .clientCredentials, tokens.refreshToken == nil {
                expireWithoutRefreshToken(start.key)
                continue
            }
            lateness.record(now.timeIntervalSince(start.plannedAt))
            metrics?.refreshStarted(lateBy: now.timeIntervalSince(start.plannedAt))
            _ = refresh(start.key, variant: TokenVariant())
            started += 1
        }
        warnAboutBacklogs(now: now)
        return started
    }

    /// Seconds until the earliest planned refresh (0 when one is due), `nil` when none is
    /// planned; from now on, a plan earlier than that wakes the scheduler (``setSchedulerWakeup(_:)``).
    func secondsUntilNextPlan() -> TimeInterval? {
        schedulerWakesAt = queue.earliestPlan
        return schedulerWakesAt.map { max(0, $0.timeIntervalSince(now())) }
    }

    /// How ``RefreshScheduler`` is woken when a refresh is planned earlier than it will look.
    func setSchedulerWakeup(_ wake: @escaping @Sendable () -> Void) {
        wakeScheduler = wake
    }

    /// What administrators see of the background refresh in `daemon.info`.
    func refreshStatistics() -> RefreshStatistics {
        let waiting = Dictionary(uniqueKeysWithValues: overdue(at: now()).map { ($0.key.rawValue, $0.value.count) })
        return RefreshStatistics(inFlight: queue.inFlight, waiting: waiting, started: lateness.count,
                                 latenessP50Seconds: lateness.quantile(0.5), latenessP99Seconds: lateness.quantile(0.99),
                                 latenessMaxSeconds: lateness.quantile(1))
    }

    /// Sessions whose planned refresh time has passed, by provider: how many, and how late the
    /// oldest is. A due session that has started has no planned time, so these wait for a slot.
    private func overdue(at now: Date) -> [ProviderID: (count: Int, oldest: TimeInterval)] {
        var overdue: [ProviderID: (count: Int, oldest: TimeInterval)] = [:]
        for (key, record) in sessions.all {
            guard let at = record.nextRefreshAt, at <= now else { continue }
            let previous = overdue[key.provider] ?? (0, 0)
            overdue[key.provider] = (previous.count + 1, max(previous.oldest, now.timeIntervalSince(at)))
        }
        return overdue
    }

    /// A provider slower than its sessions need: said once per ``backlogWarningInterval``,
    /// with how many sessions wait and how late the oldest is. Looked at most once a second
    /// (it reads every session), and only while some provider's line is not empty.
    private func warnAboutBacklogs(now: Date) {
        guard !queue.providersWaiting.isEmpty, backlogCheckedAt.map({ now.timeIntervalSince($0) >= 1 }) ?? true else { return }
        backlogCheckedAt = now
        for (provider, backlog) in overdue(at: now).sorted(by: { $0.key < $1.key }) {
            // A second's wait is within the scheduler's precision, not a slow provider.
            guard backlog.oldest >= 1 else { continue }
            if let warned = backlogWarnedAt[provider], now.timeIntervalSince(warned) < Self.backlogWarningInterval { continue }
            backlogWarnedAt[provider] = now
            logger.warning("refreshes fall behind: the provider is slower than its sessions need", metadata: [
                "provider.id": "\(provider)", "refresh.waiting": "\(backlog.count)",
                "refresh.oldest_overdue_seconds": "\(Int(backlog.oldest.rounded(.up)))",
                "refresh.in_flight_limit": "\(queue.limits.perProvider)",
            ])
        }
    }

    /// Waits until no refresh is in flight; lets tests step an injected clock deterministically.
    func waitForRefreshes() async {
        while let task = refreshes.values.first {
            _ = await task.value
        }
    }

    // MARK: Status

    /// The caller's sessions, optionally of one provider; never token values.
    /// The sessions of `uid`, or of everyone (each then naming its uid) when `uid` is nil.
    func status(uid: UInt32?, provider: ProviderID?) -> [SessionStatus] {
        let now = now()
        return sessions.all.filter { (uid == nil || $0.key.uid == uid) && (provider == nil || $0.key.provider == provider) }
            .sorted { $0.key < $1.key }
            .map { key, record in
                let state = Self.reportedState(record, at: now)
                // Past its planned time and not started: waiting for a slot at a provider that falls behind.
                let overdue = record.nextRefreshAt.map { now.timeIntervalSince($0) }.flatMap { $0 >= 1 ? Int($0) : nil }
                return SessionStatus(provider: key.provider.rawValue, session: key.name.rawValue, state: state,
                                     expiresAt: record.tokens?.expiresAt, nextRefreshAt: record.nextRefreshAt, lastError: record.lastError,
                                     subject: record.subject, uid: uid == nil ? key.uid : nil, refreshOverdueSeconds: overdue)
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
    private static func reportedState(_ record: SessionRecord, at now: Date) -> SessionState {
        guard record.state == .authenticated, let tokens = record.tokens, !tokens.isValid(for: 0, at: now) else { return record.state }
        return .expired
    }

    /// The narrower tokens cached for `key` (bounded by ``maximumVariantsPerSession``).
    func variantCount(for key: SessionKey) -> Int { sessions[key]?.variants.count ?? 0 }

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

    // MARK: The refresh itself

    /// The refresh of `key`'s `variant` in flight, or a new one.
    private func refresh(_ key: SessionKey, variant: TokenVariant) -> Task<Result<TokenSet, AuthGateError>, Never> {
        let refreshKey = RefreshKey(session: key, variant: variant)
        if let inFlight = refreshes[refreshKey] { return inFlight }
        // Wait for the session's other refreshes: each may rotate the refresh token this one spends.
        let earlier = refreshes.filter { $0.key.session == key }.map(\.value)
        let generation = sessions[key]?.generation ?? 0
        if variant.isEmpty { sessions[key]?.state = .refreshing }
        // The slot is held from here to the end, waiting included: the task is bound for the provider.
        queue.started(key.provider)
        let task = Task { () -> Result<TokenSet, AuthGateError> in
            for other in earlier { _ = await other.value }
            let result = await self.performRefresh(refreshKey, generation: generation)
            self.refreshEnded(key.provider)
            return result
        }
        refreshes[refreshKey] = task
        return task
    }

    /// A refresh's slot is free: the next due session takes it at once.
    private func refreshEnded(_ provider: ProviderID) {
        queue.finished(provider)
        refreshDue()
    }

    private func performRefresh(_ refreshKey: RefreshKey, generation: UInt64) async -> Result<TokenSet, AuthGateError> {
        let key = refreshKey.session
        let variant = refreshKey.variant
        // A session replaced or removed meanwhile has already dropped its refreshes.
        defer { if sessions[key]?.generation == generation { refreshes[refreshKey] = nil } }
        guard let record = sessions[key], record.generation == generation, let tokens = record.tokens else {
            return .failure(.loginRequired(provider: key.provider.rawValue))
        }
        let client = record.binding.client
        var result: Result<TokenSet, AuthGateError>
        do throws(AuthGateError) {
            if record.grant == .clientCredentials {
                // RFC 6749 §4.4.3: no refresh token; the client simply asks again.
                let scopes = variant.isEmpty ? tokens.scopes : variant.scopes
                result = .success(try await client.signInAsClient(TokenVariant(scopes: scopes, resource: variant.resource)).tokens)
            } else if let refreshToken = tokens.refreshToken {
                result = .success(try await client.refresh(refreshToken, variant: variant))
            } else {
                result = .failure(.loginRequired(provider: key.provider.rawValue))
            }
        } catch {
            result = .failure(error)
        }
        // Check again after the await: the session may have been replaced or removed meanwhile.
        guard sessions[key]?.generation == generation, !Task.isCancelled else {
            return result
        }
        if variant.isEmpty {
            result = finishSessionRefresh(key, result: result, previous: tokens)
        } else {
            result = finishVariantRefresh(key, variant: variant, result: result)
        }
        return result.map { variant.isEmpty ? $0 : Self.withoutRefreshToken($0) }
    }

    /// Takes the outcome of a refresh of the session's own token and plans the next one.
    /// - Returns: The tokens as stored (a kept refresh token, the previous scopes filled in).
    private func finishSessionRefresh(_ key: SessionKey, result: Result<TokenSet, AuthGateError>,
                                      previous: TokenSet) -> Result<TokenSet, AuthGateError> {
        guard var record = sessions[key] else { return result }
        var result = result
        defer {
            if case .failure(let error) = result { metrics?.refreshEnded(provider: key.provider, outcome: error.reason) }
            else { metrics?.refreshEnded(provider: key.provider, outcome: nil) }
        }
        // OIDC Core §12.2: an ID token on refresh names the same user, or the tokens are not
        // this session's; they are refused and the session keeps what it had.
        if case .success(let tokens) = result, let subject = tokens.idTokenSubject, let expected = record.subject, subject != expected {
            result = .failure(AuthGateError(.serverError, "\(key.provider) answered a refresh with an ID token for another user; the tokens were refused."))
        }
        switch result {
        case .success(var tokens):
            tokens.idTokenSubject = nil
            // RFC 6749 §6: a server that issues no new refresh token leaves the old one valid.
            // A rotated one replaces it here, before any caller sees the new access token.
            if tokens.refreshToken == nil {
                tokens.refreshToken = record.tokens?.refreshToken
                tokens.refreshTokenExpiresAt = record.tokens?.refreshTokenExpiresAt
            }
            if tokens.scopes.isEmpty { tokens.scopes = previous.scopes }
            record.tokens = tokens
            record.obtainedAt = now()
            record.state = .authenticated
            record.lastError = nil
            record.failures = 0
            sessions[key] = record
            planRefresh(key)
            // A rotated refresh token reaches the disk before any caller sees the new access token.
            if record.binding.storage == .persistent { persist(key.uid) }
            logger.info("session refreshed", metadata: metadata(key, ["session.expires_at": "\(tokens.expiresAt)"]))
            return .success(tokens)
        case .failure(let error) where error.reason == .loginRequired:
            endSession(key, reason: error.message)
            logger.notice("refresh refused; sign-in required", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
            return result
        case .failure(let error):
            record.failures += 1
            record.lastError = error.message
            let stillValid = record.tokens?.isValid(for: 0, at: now()) ?? false
            record.state = stillValid ? .authenticated : .expired
            sessions[key] = record
            let delay = RefreshSchedule.retryDelay(failures: record.failures, policy: record.binding.policy,
                                                   retryAfterSeconds: error.retryAfterSeconds, random: random())
            reschedule(key, at: now().addingTimeInterval(delay))
            logger.warning("refresh failed; retrying", metadata: metadata(key, [
                "error.reason": "\(error.reason.rawValue)", "refresh.failures": "\(record.failures)",
                "refresh.retry_in_seconds": "\(Int(delay.rounded(.up)))",
            ]))
            return result
        }
    }

    /// Caches a narrower token; a refresh token rotated on the way becomes the session's.
    /// - Returns: The outcome as the caller gets it: refused when its ID token names another user.
    private func finishVariantRefresh(_ key: SessionKey, variant: TokenVariant, result: Result<TokenSet, AuthGateError>) -> Result<TokenSet, AuthGateError> {
        var result = result
        // OIDC Core §12.2, as for the session's own token: nothing of tokens issued for
        // another user is kept, not even a rotated refresh token.
        if case .success(let tokens) = result, let subject = tokens.idTokenSubject, let expected = sessions[key]?.subject, subject != expected {
            result = .failure(AuthGateError(.serverError, "\(key.provider) answered a refresh with an ID token for another user; the tokens were refused."))
        }
        switch result {
        case .success(let tokens):
            if let rotated = tokens.refreshToken, rotated != sessions[key]?.tokens?.refreshToken {
                sessions[key]?.tokens?.refreshToken = rotated
                sessions[key]?.tokens?.refreshTokenExpiresAt = tokens.refreshTokenExpiresAt
                if sessions[key]?.binding.storage == .persistent { persist(key.uid) }
            }
            if let variants = sessions[key]?.variants, variants[variant] == nil, variants.count >= Self.maximumVariantsPerSession,
               let soonest = variants.min(by: { $0.value.expiresAt < $1.value.expiresAt })?.key {
                sessions[key]?.variants[soonest] = nil
            }
            sessions[key]?.variants[variant] = Self.withoutRefreshToken(tokens)
            logger.info("narrower token obtained", metadata: metadata(key, ["token.variant": "\(variant)"]))
        case .failure(let error) where error.reason == .loginRequired:
            endSession(key, reason: error.message)
            logger.notice("refresh refused; sign-in required", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
        case .failure(let error):
            logger.warning("narrower token refused", metadata: metadata(key, ["token.variant": "\(variant)", "error.reason": "\(error.reason.rawValue)"]))
        }
        return result
    }

    /// The provider refused the session, or its token ran out with nothing to refresh it:
    /// the tokens go at once and the user must sign in again.
    private func endSession(_ key: SessionKey, reason: String) {
        sessions[key]?.tokens = nil
        sessions[key]?.variants = [:]
        sessions[key]?.state = .loginRequired
        sessions[key]?.lastError = reason
        sessions[key]?.nextRefreshAt = nil
        if sessions[key]?.binding.storage == .persistent { persist(key.uid) }
    }

    private func expireWithoutRefreshToken(_ key: SessionKey) {
        endSession(key, reason: "The access token expired and the provider issued no refresh token; sign in again.")
        logger.notice("session expired; sign-in required", metadata: metadata(key))
    }

    // MARK: Persistence

    /// Takes back the sessions saved before a restart. A session whose provider is gone, is
    /// no longer `persistent`, or now has another issuer or client is dropped, and the file
    /// rewritten without it. Tokens that expired meanwhile are refreshed at the first tick.
    /// - Returns: How many sessions were restored.
    @discardableResult
    func restore(_ saved: [UInt32: [PersistedSession]], bindings: [ProviderID: SessionBinding]) -> Int {
        var restored = 0
        for (uid, list) in saved {
            persistedUIDs.insert(uid)
            var dropped = false
            for session in list {
                guard let provider = ProviderID(session.provider), let name = SessionName(session.session),
                      let binding = bindings[provider], binding.storage == .persistent,
                      binding.identity == ProviderIdentity(issuer: session.issuer, clientID: session.clientID) else {
                    dropped = true
                    logger.notice("saved session dropped: its provider is gone, no longer persistent, or has another issuer or client",
                                  metadata: ["peer.uid": "\(uid)", "provider.id": "\(session.provider)", "session": "\(session.session)"])
                    continue
                }
                let key = SessionKey(uid: uid, provider: provider, name: name)
                sessions[key] = SessionRecord(grant: session.grant, tokens: session.tokens, subject: session.subject, state: .authenticated,
                                              lastError: nil, generation: takeGeneration(), binding: binding, obtainedAt: session.savedAt)
                if session.tokens.isValid(for: 0, at: now()) {
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

    /// Writes the uid's `persistent` sessions (the whole list: one sealed file per uid).
    /// Synchronous on purpose: nothing else in this actor runs until the file is on disk, so
    /// a caller never holds a token whose refresh token the disk does not know.
    private func persist(_ uid: UInt32) {
        guard let persistence else { return }
        let kept = sessions.all.filter { $0.key.uid == uid && $0.value.binding.storage == .persistent && $0.value.tokens != nil }
        guard !kept.isEmpty || persistedUIDs.contains(uid), let store = persistence.store() else { return }
        let list = kept.sorted { $0.key < $1.key }.map { key, record in
            // `savedAt` carries when the tokens arrived, which the next refresh is planned from.
            PersistedSession(provider: key.provider.rawValue, session: key.name.rawValue, grant: record.grant, subject: record.subject,
                             issuer: record.binding.identity.issuer, clientID: record.binding.identity.clientID,
                             tokens: record.tokens!, savedAt: record.obtainedAt)
        }
        let start = ContinuousClock.now
        do {
            try store.save(list, uid: uid)
            metrics?.storeWrite(succeeded: true, duration: .now - start)
            if list.isEmpty { persistedUIDs.remove(uid) } else { persistedUIDs.insert(uid) }
        } catch {
            metrics?.storeWrite(succeeded: false, duration: .now - start)
            logger.error("cannot save sessions; they stay in memory: \(error)", metadata: ["peer.uid": "\(uid)"])
        }
    }

    // MARK: Scheduling

    /// Plans the next refresh of fresh tokens; sessions without a refresh token are planned
    /// to end when their token does.
    private func planRefresh(_ key: SessionKey) {
        guard let record = sessions[key], let tokens = record.tokens else { return }
        let at: Date
        if record.grant != .clientCredentials, tokens.refreshToken == nil {
            at = tokens.expiresAt
        } else {
            at = RefreshSchedule.refreshTime(obtainedAt: record.obtainedAt, expiresAt: tokens.expiresAt,
                                             policy: record.binding.policy, random: random())
        }
        reschedule(key, at: at)
    }

    private func reschedule(_ key: SessionKey, at: Date) {
        sessions[key]?.nextRefreshAt = at
        queue.plan(key, at: at)
        if let wakeScheduler, schedulerWakesAt.map({ at < $0 }) ?? true {
            schedulerWakesAt = at
            wakeScheduler()
        }
    }

    private func cancelRefreshes(of key: SessionKey) {
        for refreshKey in refreshes.keys where refreshKey.session == key {
            refreshes.removeValue(forKey: refreshKey)?.cancel()
        }
    }

    private static func withoutRefreshToken(_ tokens: TokenSet) -> TokenSet {
        var tokens = tokens
        tokens.idTokenSubject = nil
        tokens.refreshToken = nil
        tokens.refreshTokenExpiresAt = nil
        return tokens
    }

    private func takeGeneration() -> UInt64 {
        defer { nextGeneration += 1 }
        return nextGeneration
    }

    private func metadata(_ key: SessionKey, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        extra.merging(["peer.uid": "\(key.uid)", "provider.id": "\(key.provider)", "session": "\(key.name)"]) { a, _ in a }
    }
}
