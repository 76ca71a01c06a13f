import AuthGateCore
import FoundationEssentials

/// The client-credentials sign-ins the daemon makes when a session of a service's provider
/// (``ProviderConfiguration/signsInAsClient``) is first asked for a token: one at a time per
/// session, and the callers that ask meanwhile wait for that one instead of signing in again.
///
/// A caller learns the session is missing before it gets here, and the sign-in another caller
/// ran may have ended in between: each sign-in therefore first asks `isSignedIn`, and one that
/// finds the session there does nothing (the caller then reads the token that sign-in stored).
///
/// Every such sign-in uses the provider's one client, shared by every uid: a uid that asks for
/// fresh session names (or signs out and asks again) must not make the daemon hammer the token
/// endpoint until the provider throttles or locks the client for everyone. So, per uid and
/// provider:
/// - sign-ins that reach the provider are rate-limited (a bucket of ``Limits/burst`` that
///   refills at ``Limits/perSecond``); beyond it the caller is refused with `rate_limited` and
///   the seconds to wait;
/// - a refused sign-in is remembered (``Limits/rememberRefusal``, or ``Limits/rememberTransient``
///   for a provider that could not be reached) and given to the next callers instead of asking
///   the provider again;
/// - a provider that throttles (`429` or `503` with `Retry-After`, as Entra ID and Okta answer)
///   is not asked again before its `Retry-After`, and then not all at once: each daemon waits a
///   random time in `Retry-After × [1, 1 + 4 × 2^(n-1)]` after the n-th throttling in a row,
///   the window ending at ``Limits/maximumRetryAfter`` (or at twice a `Retry-After` that is
///   longer: never one moment for all). A fleet's daemons started together, throttled
///   together, so come back spread out instead of in the next second together
///   (`authgate-bench --only fleet`, docs/BENCHMARKS.md);
/// - a provider whose file sets `refresh.first_use_spread_seconds` has each sign-in of the
///   daemon's first that many seconds wait a random part of what is left of them
///   (``RefreshPolicy/firstUseWait(sinceStart:random:)``): a fleet's daemons started together
///   have nothing to back off from before their first answer, so their first requests are
///   spread instead.
///
/// A sign-in runs in a task of its own, so that a caller who hangs up does not end it for the
/// others waiting; it is bounded by the provider's timeouts, and ends with the last request
/// waiting for it only in that sense.
actor FirstUseSignIns {
    struct Limits: Sendable {
        var burst: Double = 10
        var perSecond: Double = 1
        var rememberRefusal: TimeInterval = 10
        var rememberTransient: TimeInterval = 2
        /// Where the window after a provider's `Retry-After` ends at the latest (unless the
        /// `Retry-After` is longer).
        var maximumRetryAfter: TimeInterval = 300
    }

    /// What became of a first-use sign-in, for the metrics.
    enum Outcome: String, CaseIterable {
        /// It reached the provider (whatever the provider said).
        case attempted
        /// Refused by the rate limit before reaching the provider.
        case rateLimited = "rate_limited"
        /// Answered with a refusal remembered from an earlier attempt.
        case remembered
    }

    private var running: [SessionKey: Task<Result<Void, AuthGateError>, Never>] = [:]
    private var buckets: RateBuckets<UserProvider>
    private var refusals: [UserProvider: (error: AuthGateError, until: Date)] = [:]
    /// Throttlings in a row, per uid and provider, until a sign-in succeeds (or, among many,
    /// until the refusal of the last has passed).
    private var throttled: [UserProvider: Int] = [:]
    private let limits: Limits
    private let now: @Sendable () -> Date
    private let random: @Sendable () -> Double
    private let wait: @Sendable (TimeInterval) async -> Void
    private let counted: @Sendable (ProviderID, Outcome) -> Void
    /// When the daemon started (this was made): the start of the first-use spread's window.
    private let startedAt: Date
    /// The daemon is stopping: nothing more is started, and what waits is cancelled.
    private var stopping = false

    /// - Parameters:
    ///   - random: Numbers in `0..<1` for the spreads; injected by tests.
    ///   - wait: Waits the seconds a spread sign-in waits (a task's sleep; injected by tests).
    init(
        limits: Limits = Limits(),
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        wait: @escaping @Sendable (TimeInterval) async -> Void = { try? await Task.sleep(for: .seconds($0)) },
        counted: @escaping @Sendable (ProviderID, Outcome) -> Void = { _, _ in }
    ) {
        self.limits = limits
        buckets = RateBuckets(burst: limits.burst, perSecond: limits.perSecond)
        self.now = now
        self.random = random
        self.wait = wait
        self.counted = counted
        startedAt = now()
    }

    /// Runs `signIn` for `key` unless `isSignedIn` says it is no longer needed, or waits for the
    /// one running.
    /// - Parameter bounded: Whether the caller's uid is held to the limits (not root or the
    ///   daemon's own user).
    /// - Parameter policy: The provider's `refresh`, whose `first_use_spread_seconds` a sign-in
    ///   early in the daemon's life waits out.
    /// - Throws: The sign-in's error, a remembered one, or `rate_limited`.
    func signIn(
        _ key: SessionKey,
        bounded: Bool = true,
        policy: RefreshPolicy = RefreshPolicy(),
        isSignedIn: @escaping @Sendable () async -> Bool,
        _ signIn: @escaping @Sendable () async -> Result<Void, AuthGateError>
    ) async throws(AuthGateError) {
        let task: Task<Result<Void, AuthGateError>, Never>
        let place = UserProvider(uid: key.uid, provider: key.provider)
        guard !stopping else { throw Self.stoppingError }
        if let existing = running[key] {
            task = existing
        } else {
            let now = now()
            if let refusal = refusals[place] {
                if refusal.until > now {
                    counted(key.provider, .remembered)
                    var error = refusal.error
                    error.retryAfterSeconds = max(1, Int(refusal.until.timeIntervalSince(now).rounded(.up)))
                    throw error
                }
                refusals[place] = nil
            }
            if bounded { try take(place, at: now) }
            counted(key.provider, .attempted)
            let delay = policy.firstUseWait(sinceStart: now.timeIntervalSince(startedAt), random: random())
            let wait = wait
            task = Task {
                if delay > 0 { await wait(delay) }
                // Cancelled by the daemon's stop (during the spread's wait, say): no sign-in.
                if Task.isCancelled { return .failure(Self.stoppingError) }
                if await isSignedIn() { return .success(()) }
                return await signIn()
            }
            running[key] = task
        }
        let outcome = await task.value
        if running[key] == task {
            running[key] = nil
            switch outcome {
            case .failure(let error): remember(error, for: place)
            case .success: throttled[place] = nil
            }
        }
        try outcome.get()
    }

    /// Admits a `login` with a service's grant that a caller asked for by name (it replaces the
    /// session, so it never joins one running): the same provider's client as a first use, so
    /// the same limits — a refusal the provider gave the uid is given again until it passes,
    /// and the uid's bucket for the provider is taken from. Followed by ``settled(_:_:)``.
    /// - Throws: A remembered refusal, or `rate_limited`.
    func admitExplicit(_ key: SessionKey, bounded: Bool) throws(AuthGateError) {
        guard !stopping else { throw Self.stoppingError }
        let place = UserProvider(uid: key.uid, provider: key.provider)
        let now = now()
        if let refusal = refusals[place] {
            if refusal.until > now {
                var error = refusal.error
                error.retryAfterSeconds = max(1, Int(refusal.until.timeIntervalSince(now).rounded(.up)))
                throw error
            }
            refusals[place] = nil
        }
        if bounded { try take(place, at: now, counting: false) }
    }

    /// How an admitted explicit sign-in ended: a refusal of the provider's is remembered as a
    /// first use's is.
    func settled(_ key: SessionKey, _ error: AuthGateError?) {
        let place = UserProvider(uid: key.uid, provider: key.provider)
        if let error { remember(error, for: place) } else { throttled[place] = nil }
    }

    /// Part of the daemon's stop: the sign-ins under way (or waiting out the first-use spread)
    /// are cancelled, their callers told, and none is started any more — none can store a
    /// session once the sessions have stopped.
    func shutdown() {
        stopping = true
        for task in running.values { task.cancel() }
    }

    private static let stoppingError = AuthGateError(.serviceUnavailable, "The daemon is stopping; ask again once it runs.")

    /// One sign-in from the uid's bucket for the provider, or `rate_limited`.
    private func take(_ place: UserProvider, at now: Date, counting: Bool = true) throws(AuthGateError) {
        guard let wait = buckets.take(place, at: now) else { return }
        if counting { counted(place.provider, .rateLimited) }
        throw AuthGateError(
            .rateLimited,
            "You started too many sign-ins to \(place.provider) in a short time; try again in \(wait) s.",
            retryAfterSeconds: wait
        )
    }

    private func remember(_ error: AuthGateError, for place: UserProvider) {
        let seconds: TimeInterval
        // Only the provider's answers: `rate_limited` is the daemon's own limit (the uid's share
        // of requests at providers in flight), which says nothing of the provider.
        switch error.reason {
        case .providerUnavailable, .networkError, .serviceUnavailable, .invalidCredentials, .unsupportedGrant, .permissionDenied, .serverError,
            .workloadTokenInvalid, .dpopRejected:
            if let retryAfter = error.retryAfterSeconds {
                // Throttled: not before Retry-After (R), then at a random point of a window that
                // widens with each throttling in a row, up to the cap; an R at or past the cap
                // gets one more R (as refreshes do), so that a fleet never comes back in one second.
                let times = min((throttled[place] ?? 0) + 1, 16)
                throttled[place] = times
                let retryAfter = TimeInterval(max(retryAfter, 1))
                let window = min(retryAfter * 4 * Double(1 << (times - 1)), max(limits.maximumRetryAfter - retryAfter, retryAfter))
                seconds = retryAfter + window * random()
            } else {
                let transient = [.providerUnavailable, .networkError, .serviceUnavailable].contains(error.reason)
                seconds = transient ? limits.rememberTransient : limits.rememberRefusal
            }
        default:
            return
        }
        refusals[place] = (error, now().addingTimeInterval(seconds))
        if refusals.count > 4096 || throttled.count > 4096 {
            // Past refusals say nothing, nor does a count of throttlings whose last has passed:
            // one entry per uid and provider is kept only while it matters.
            let now = now()
            refusals = refusals.filter { $0.value.until > now }
            throttled = throttled.filter { refusals[$0.key] != nil }
        }
    }
}
