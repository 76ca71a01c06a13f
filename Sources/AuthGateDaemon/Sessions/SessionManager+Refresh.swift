import AuthGateCore
import FoundationEssentials
import Logging

/// Background refresh (``RefreshScheduler`` calls ``refreshDue()``), the refresh itself with
/// its single flight, and the planning of each session's next one.
extension SessionManager {
    // MARK: Background refresh

    /// Starts the refreshes that are due while slots are free (see ``RefreshQueue``), and ends
    /// sessions that expired without a refresh token. Called by ``RefreshScheduler`` when the
    /// earliest planned time comes, and after every refresh (a freed slot).
    /// - Returns: How many refreshes it started.
    @discardableResult
    func refreshDue() -> Int {
        guard !isShutDown else { return 0 }
        let now = now()
        replanRotatedPlatformTokens(now: now)
        var started = 0
        while let start = queue.next(
            now: now,
            current: { key, plannedAt in
                guard let record = sessions[key], record.nextRefreshAt == plannedAt else { return nil }
                return record.tokens?.expiresAt
            }
        ) {
            guard let record = sessions[start.key], let tokens = record.tokens else { continue }
            sessions[start.key]?.nextRefreshAt = nil
            if refreshes[RefreshKey(session: start.key, variant: TokenVariant())] != nil { continue }  // a caller's refresh plans the next one
            if !record.grant.isService, tokens.refreshToken == nil {
                expireWithoutRefreshToken(start.key)
                continue
            }
            let deadline = tokens.expiresAt.addingTimeInterval(-RefreshSchedule.expiryMargin)
            if let later = providerPauses.deferral(of: start.key.provider, at: now, before: deadline, random: random) {
                // The provider asked to be left alone: after its pause, spread over its window.
                reschedule(start.key, at: later)
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
        let untilPlan = schedulerWakesAt.map { max(0, $0.timeIntervalSince(now())) }
        // Platform token files are looked at on the scheduler's wake-ups.
        return platformTokens.sleep(untilPlan: untilPlan)
    }

    /// RFC 8693 / RFC 7523 sessions signed in with a platform token file: when the platform has
    /// rotated the file since (kubelet does before the token expires), the session signs in
    /// again now with the new token, so the provider's token follows the platform's identity.
    func replanRotatedPlatformTokens(now: Date) {
        for key in platformTokens.due(at: now) {
            guard let record = sessions[key], let revision = record.platformRevision else {
                platformTokens.forget(key)
                continue
            }
            let current = record.binding.client.platformTokenRevision(for: record.grant)
            guard current != nil, current != revision, record.nextRefreshAt != nil else { continue }
            // Marked as seen now: a sign-in that fails keeps the backoff's plan, not a retry per check.
            sessions[key]?.platformRevision = current
            logger.info("platform token rotated; signing in again with it", metadata: key.logMetadata())
            reschedule(key, at: now)
        }
    }

    /// How ``RefreshScheduler`` is woken when a refresh is planned earlier than it will look.
    func setSchedulerWakeup(_ wake: @escaping @Sendable () -> Void) {
        wakeScheduler = wake
    }

    /// What administrators see of the background refresh in `daemon.info`.
    func refreshStatistics() -> RefreshReport {
        let waiting = Dictionary(uniqueKeysWithValues: overdue(at: now()).map { ($0.key.rawValue, $0.value.count) })
        return RefreshReport(
            inFlight: queue.inFlight,
            waiting: waiting,
            started: lateness.count,
            latenessP50Seconds: lateness.quantile(0.5),
            latenessP99Seconds: lateness.quantile(0.99),
            latenessMaxSeconds: lateness.quantile(1)
        )
    }

    /// Sessions whose planned refresh time has passed, by provider: how many, and how late the
    /// oldest is. A due session that has started has no planned time, so these wait for a slot.
    func overdue(at now: Date) -> [ProviderID: (count: Int, oldest: TimeInterval)] {
        var overdue: [ProviderID: (count: Int, oldest: TimeInterval)] = [:]
        for (key, record) in sessions.all {
            guard let at = record.nextRefreshAt, at <= now else { continue }
            let previous = overdue[key.provider] ?? (0, 0)
            overdue[key.provider] = (previous.count + 1, max(previous.oldest, now.timeIntervalSince(at)))
        }
        return overdue
    }

    /// A provider slower than its sessions need: said once per ``BacklogWarnings/interval``,
    /// with how many sessions wait and how late the oldest is. Looked at most once a second
    /// (it reads every session), and only while some provider's line is not empty.
    func warnAboutBacklogs(now: Date) {
        guard !queue.providersWaiting.isEmpty, backlogWarnings.looks(at: now) else { return }
        for (provider, backlog) in overdue(at: now).sorted(by: { $0.key < $1.key }) {
            // A second's wait is within the scheduler's precision, not a slow provider.
            guard backlog.oldest >= 1, backlogWarnings.warns(about: provider, at: now) else { continue }
            logger.warning(
                "refreshes fall behind: the provider is slower than its sessions need",
                metadata: [
                    "provider.id": "\(provider)", "refresh.waiting": "\(backlog.count)",
                    "refresh.oldest_overdue_seconds": "\(Int(backlog.oldest.rounded(.up)))",
                    "refresh.in_flight_limit": "\(queue.limits.perProvider)",
                ]
            )
        }
    }

    /// Waits until no refresh is in flight; lets tests step an injected clock deterministically.
    func waitForRefreshes() async {
        while let task = refreshes.values.first {
            _ = await task.value
        }
    }

    // MARK: The refresh itself

    /// The refresh of `key`'s `variant` in flight, or a new one.
    func refresh(_ key: SessionKey, variant: TokenVariant) -> Task<Result<TokenSet, AuthGateError>, Never> {
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
    func refreshEnded(_ provider: ProviderID) {
        queue.finished(provider)
        refreshDue()
    }

    func performRefresh(_ refreshKey: RefreshKey, generation: UInt64) async -> Result<TokenSet, AuthGateError> {
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
            if variant.exchange != nil {
                // RFC 8693: exchanged again with the session's current access token.
                result = .success(try await client.exchange(tokens, for: variant))
            } else if record.grant.isService {
                // RFC 6749 §4.4.3: no refresh token; the service simply asks again (with the
                // platform's current token, for the workload grants).
                let scopes = variant.isEmpty ? tokens.scopes : variant.scopes
                result = .success(
                    try await client.signInAsService(record.grant, TokenVariant(scopes: scopes, resource: variant.resource), proofKey: tokens.proofKey).tokens
                )
            } else if let refreshToken = tokens.refreshToken {
                result = .success(try await client.refresh(refreshToken, variant: variant, proofKey: tokens.proofKey))
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
    func finishSessionRefresh(
        _ key: SessionKey,
        result: Result<TokenSet, AuthGateError>,
        previous: TokenSet
    ) -> Result<TokenSet, AuthGateError> {
        guard var record = sessions[key] else { return result }
        var result = result
        defer {
            if case .failure(let error) = result {
                metrics?.refreshEnded(provider: key.provider, outcome: error.reason)
            } else {
                metrics?.refreshEnded(provider: key.provider, outcome: nil)
            }
        }
        // OIDC Core §12.2: an ID token on refresh names the same user, or the tokens are not
        // this session's; they are refused and the session keeps what it had.
        if case .success(let tokens) = result, let subject = tokens.idTokenSubject, let expected = record.subject, subject != expected {
            result = .failure(AuthGateError(.serverError, "\(key.provider) answered a refresh with an ID token for another user; the tokens were refused."))
        }
        switch result {
        case .success(var tokens):
            tokens.idTokenSubject = nil
            record.platformRevision = record.binding.client.platformTokenRevision(for: record.grant)
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
            logger.info("session refreshed", metadata: key.logMetadata(["session.expires_at": "\(tokens.expiresAt)"]))
            return .success(tokens)
        case .failure(let error) where error.reason == .loginRequired:
            endSession(key, reason: error.message)
            logger.notice("refresh refused; sign-in required", metadata: key.logMetadata(["error.reason": "\(error.reason.rawValue)"]))
            return result
        case .failure(let error):
            record.failures += 1
            record.lastError = error.message
            let stillValid = record.tokens?.isValid(for: 0, at: now()) ?? false
            record.state = stillValid ? .authenticated : .expired
            sessions[key] = record
            let delay = RefreshSchedule.retryDelay(
                failures: record.failures,
                policy: record.binding.policy,
                retryAfterSeconds: error.retryAfterSeconds,
                expiresIn: record.tokens.map { $0.expiresAt.timeIntervalSince(now()) },
                random: random()
            )
            reschedule(key, at: now().addingTimeInterval(delay))
            if let seconds = error.retryAfterSeconds, seconds > 0 {
                providerPauses.pause(key.provider, retryAfterSeconds: seconds, at: now())
            }
            logger.warning(
                "refresh failed; retrying",
                metadata: key.logMetadata([
                    "error.reason": "\(error.reason.rawValue)", "refresh.failures": "\(record.failures)",
                    "refresh.retry_in_seconds": "\(Int(delay.rounded(.up)))",
                ])
            )
            return result
        }
    }

    /// Caches a narrower token; a refresh token rotated on the way becomes the session's.
    /// - Returns: The outcome as the caller gets it: refused when its ID token names another user.
    func finishVariantRefresh(_ key: SessionKey, variant: TokenVariant, result: Result<TokenSet, AuthGateError>) -> Result<TokenSet, AuthGateError> {
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
                let soonest = variants.min(by: { $0.value.expiresAt < $1.value.expiresAt })?.key
            {
                sessions[key]?.variants[soonest] = nil
            }
            sessions[key]?.variants[variant] = Self.withoutRefreshToken(tokens)
            logger.info("narrower token obtained", metadata: key.logMetadata(["token.variant": "\(variant)"]))
        case .failure(let error) where error.reason == .loginRequired:
            endSession(key, reason: error.message)
            logger.notice("refresh refused; sign-in required", metadata: key.logMetadata(["error.reason": "\(error.reason.rawValue)"]))
        case .failure(let error):
            logger.warning("narrower token refused", metadata: key.logMetadata(["token.variant": "\(variant)", "error.reason": "\(error.reason.rawValue)"]))
        }
        return result
    }

    /// The provider refused the session, or its token ran out with nothing to refresh it:
    /// the tokens go at once and the user must sign in again.
    func endSession(_ key: SessionKey, reason: String) {
        // One change, so that those told of the ending (watches, the desktop) get its reason.
        guard var record = sessions[key] else { return }
        record.tokens = nil
        record.variants = [:]
        record.state = .loginRequired
        record.lastError = reason
        record.nextRefreshAt = nil
        sessions[key] = record
        if record.binding.storage == .persistent { persist(key.uid) }
    }

    func expireWithoutRefreshToken(_ key: SessionKey) {
        endSession(key, reason: "The access token expired and the provider issued no refresh token; sign in again.")
        logger.notice("session expired; sign-in required", metadata: key.logMetadata())
    }

    // MARK: Scheduling

    /// Plans the next refresh of fresh tokens; sessions without a refresh token are planned
    /// to end when their token does.
    func planRefresh(_ key: SessionKey) {
        guard let record = sessions[key], let tokens = record.tokens else { return }
        let at: Date
        if !record.grant.isService, tokens.refreshToken == nil {
            at = tokens.expiresAt
        } else {
            at = RefreshSchedule.refreshTime(
                obtainedAt: record.obtainedAt,
                expiresAt: tokens.expiresAt,
                policy: record.binding.policy,
                random: random()
            )
        }
        reschedule(key, at: at)
    }

    func reschedule(_ key: SessionKey, at: Date) {
        sessions[key]?.nextRefreshAt = at
        queue.plan(key, at: at)
        if let wakeScheduler, schedulerWakesAt.map({ at < $0 }) ?? true {
            schedulerWakesAt = at
            wakeScheduler()
        }
    }

    func cancelRefreshes(of key: SessionKey) {
        for refreshKey in refreshes.keys where refreshKey.session == key {
            refreshes.removeValue(forKey: refreshKey)?.cancel()
        }
    }

    static func withoutRefreshToken(_ tokens: TokenSet) -> TokenSet {
        var tokens = tokens
        tokens.idTokenSubject = nil
        tokens.refreshToken = nil
        tokens.refreshTokenExpiresAt = nil
        return tokens
    }

    func takeGeneration() -> UInt64 {
        defer { nextGeneration += 1 }
        return nextGeneration
    }

}
