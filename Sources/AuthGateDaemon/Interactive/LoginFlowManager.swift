import AuthGateCore
import AuthGateOAuth
public import FoundationEssentials
import Logging
import NIOHTTP1
import Synchronization

/// How long interactive sign-ins may take.
public struct LoginFlowSettings: Sendable {
    /// The most a pending sign-in may take before it ends with `flow_expired` (a device code
    /// that expires sooner ends the flow sooner).
    public var lifetime: TimeInterval
    /// How long the outcome of a finished flow stays available to a late `login.complete`.
    public var retention: TimeInterval
    /// At most this many flows pending per uid (each browser flow holds a port).
    public var maximumPendingPerUser: Int
    /// At most this many finished flows kept per uid for a late `login.complete`; a begin and
    /// cancel loop otherwise piles them up for `retention`. The oldest go first.
    public var maximumFinishedPerUser = 16
    /// New sign-ins a uid may start at one provider at once, then one each ``startInterval``
    /// seconds (joining a pending one is free): each start of a device or pushed (PAR) sign-in
    /// is a request to the provider with the daemon's client, and a begin-and-cancel loop would
    /// otherwise have the provider throttle that client for every user.
    public var startBurst = 10
    public var startInterval: TimeInterval = 10

    public init(lifetime: TimeInterval = 600, retention: TimeInterval = 120, maximumPendingPerUser: Int = 8) {
        self.lifetime = lifetime
        self.retention = retention
        self.maximumPendingPerUser = maximumPendingPerUser
    }
}

/// Owns every pending interactive sign-in (device code or browser) and its tasks.
///
/// At most one flow is pending per (uid, provider, session): a second `login.begin` joins it,
/// even while the first is still asking the provider for a code. Each flow has two tasks owned
/// here: the start (device authorization request, or binding the loopback listener and
/// building the authorization URL) and the run (polling, or serving the redirect), which
/// races the flow's deadline. ``cancel(_:uid:)`` and ``shutdown()`` cancel them; a cancelled
/// run closes its listener before it ends. A finished flow keeps its outcome for
/// ``LoginFlowSettings/retention`` so that a `login.complete` arriving late still gets it.
actor LoginFlowManager {
    /// What a started flow waits on.
    private enum Work: Sendable {
        case device(DeviceAuthorization, scopes: [String])
        case browser(AuthorizationRequest, LoopbackRedirectListener)
    }

    private struct Started: Sendable {
        var begin: PendingSignIn
        var work: Work
        var deadline: Date

        func close() {
            if case .browser(_, let listener) = work { listener.close() }
        }
    }

    private struct Flow {
        var key: SessionKey
        var grant: Grant
        /// What the flow asks for; a `login.begin` asking for something else does not join it.
        var scopes: [String]
        var prompt: String?
        /// What the sign-in does with the session's consent choice when it succeeds: a caller
        /// that joins may make it stricter, never looser (``ConsentChoice/stricter(_:)``).
        var consent: ConsentChoice
        var configuration: ProviderConfiguration
        var client: any IdentityProvider
        var start: Task<Result<Started, AuthGateError>, Never>
        var run: Task<Void, Never>?
        var outcome: Result<SignedInSession, AuthGateError>?
        var finishedAt: Date?
        /// Its session is being stored: too late to cancel.
        var isFinishing = false
    }

    private var flows: [String: Flow] = [:]
    /// Those waiting in `login.complete`, told once when their flow ends.
    private var waiters: [String: [Int: AsyncStream<Void>.Continuation]] = [:]
    private var nextWaiter = 0
    /// The pending flow of each session key.
    private var pending: [SessionKey: String] = [:]
    private var isShutDown = false
    /// New flows started, per uid and provider (``LoginFlowSettings/startBurst``).
    private var starts: RateBuckets<UserProvider>
    private let sessions: SessionManager
    private let settings: LoginFlowSettings
    private let now: @Sendable () -> Date
    /// Where each flow's end is counted.
    private let metrics: (any SignInObserver)?
    private let logger: Logger

    init(
        sessions: SessionManager,
        settings: LoginFlowSettings = LoginFlowSettings(),
        now: @escaping @Sendable () -> Date = { Date() },
        metrics: (any SignInObserver)? = nil,
        logger: Logger
    ) {
        self.sessions = sessions
        self.metrics = metrics
        self.settings = settings
        self.starts = RateBuckets(burst: Double(settings.startBurst), perSecond: 1 / settings.startInterval)
        self.now = now
        self.logger = logger
    }

    // MARK: login.begin

    /// Starts a flow for `key`, or joins the one pending.
    /// - Throws: The provider's error when the flow cannot start.
    func begin(
        key: SessionKey,
        grant: Grant,
        scopes: [String],
        prompt: String?,
        consent: ConsentChoice = .keep,
        configuration: ProviderConfiguration,
        client: any IdentityProvider
    ) async throws(AuthGateError) -> PendingSignIn {
        guard !isShutDown else { throw AuthGateError(.serviceUnavailable, "authgated is stopping.") }
        // A browser sign-in that would stop a session's asking must be a person's: the provider
        // is asked to have them sign in (prompt=login) rather than let a single sign-on session
        // send the browser straight back, unseen, for any program of the uid that opened it.
        // Whatever prompt the caller asked for: `select_account` or `consent` is one click.
        let forcesSignIn = consent == .stopAsking && grant == .authorizationCode ? await sessions.asksConsent(key) : false
        purge()
        if let id = pending[key], let flow = flows[id] {
            guard flow.grant == grant, flow.scopes == scopes, flow.prompt == prompt else {
                throw AuthGateError(
                    .invalidRequest,
                    "Another sign-in to \(configuration.displayName) is pending for this session (\(flow.grant.rawValue)\(flow.prompt.map { ", prompt=\($0)" } ?? "")); finish it, or cancel it (login.cancel), first."
                )
            }
            flows[id]?.consent = flow.consent.stricter(consent)
            logger.info("sign-in joined", metadata: key.logMetadata(["flow.id": "\(id)"]))
            return try await started(id, flow.start)
        }
        // Each pending browser sign-in holds a listening port: a uid gets a few at a time.
        let mine = pending.keys.count { $0.uid == key.uid }
        guard mine < settings.maximumPendingPerUser else {
            throw AuthGateError(
                .rateLimited,
                "You have \(mine) sign-ins pending already; finish or cancel one (login.cancel) first.",
                retryAfterSeconds: 10
            )
        }
        let now = now()
        if let wait = starts.take(UserProvider(uid: key.uid, provider: key.provider), at: now) {
            throw AuthGateError(
                .rateLimited,
                "You have started many sign-ins to \(configuration.displayName) in a short time; try again in \(wait) s.",
                retryAfterSeconds: wait
            )
        }
        let id = "flow_" + Secret.random(bytes: 18).exposedValue
        let lifetime = settings.lifetime
        let logger = logger
        let start = Task { () -> Result<Started, AuthGateError> in
            await Self.start(
                id: id,
                uid: key.uid,
                grant: grant,
                scopes: scopes,
                prompt: forcesSignIn ? "login" : prompt,
                configuration: configuration,
                client: client,
                now: now,
                lifetime: lifetime,
                logger: logger
            )
        }
        flows[id] = Flow(key: key, grant: grant, scopes: scopes, prompt: prompt, consent: consent, configuration: configuration, client: client, start: start)
        pending[key] = id
        logger.info("sign-in started", metadata: key.logMetadata(["flow.id": "\(id)", "flow.grant": "\(grant.rawValue)"]))
        return try await started(id, start)
    }

    /// Waits for the flow's start; the first caller back starts its run.
    private func started(_ id: String, _ start: Task<Result<Started, AuthGateError>, Never>) async throws(AuthGateError) -> PendingSignIn {
        let result = await start.value
        // Check again after the await: the flow may have been cancelled, or have failed, meanwhile.
        guard let flow = flows[id] else {
            if case .success(let started) = result { started.close() }
            throw Self.notFound
        }
        if let outcome = flow.outcome {
            if case .success(let started) = result, flow.run == nil { started.close() }
            if case .failure(let error) = outcome { throw error }
        }
        switch result {
        case .failure(let error):
            flows[id] = nil
            if pending[flow.key] == id { pending[flow.key] = nil }
            logger.notice("sign-in could not start", metadata: flow.key.logMetadata(["flow.id": "\(id)", "error.reason": "\(error.reason.rawValue)"]))
            throw error
        case .success(let started):
            if flow.run == nil, flow.outcome == nil {
                flows[id]?.run = Task { await self.run(id, started) }
            }
            return started.begin
        }
    }

    private static func start(
        id: String,
        uid: UInt32,
        grant: Grant,
        scopes: [String],
        prompt: String?,
        configuration: ProviderConfiguration,
        client: any IdentityProvider,
        now: Date,
        lifetime: TimeInterval,
        logger: Logger
    ) async -> Result<Started, AuthGateError> {
        do throws(AuthGateError) {
            switch grant {
            case .deviceCode:
                let authorization = try await client.beginDeviceAuthorization(scopes: scopes)
                let deadline = min(authorization.expiresAt, now.addingTimeInterval(lifetime))
                let begin = PendingSignIn(
                    flowID: id,
                    grant: grant,
                    verificationURI: authorization.verificationURI.absoluteString,
                    verificationURIComplete: authorization.verificationURIComplete?.absoluteString,
                    userCode: authorization.userCode,
                    authorizationURL: nil,
                    expiresAt: deadline
                )
                return .success(Started(begin: begin, work: .device(authorization, scopes: scopes), deadline: deadline))
            case .authorizationCode:
                var configured: URL?
                if case .oidc(let remote) = configuration.settings { configured = remote.redirectURI }
                if case .oauth2(let remote) = configuration.settings { configured = remote.redirectURI }
                let listener = try await LoopbackRedirectListener.bind(configured, for: uid)
                let request: AuthorizationRequest
                do {
                    request = try await client.authorizationRequest(redirectURI: listener.redirectURI, scopes: scopes, prompt: prompt)
                } catch {
                    listener.close()
                    throw error
                }
                let deadline = now.addingTimeInterval(lifetime)
                logger.debug("redirect listener open", metadata: ["flow.id": "\(id)", "redirect.port": "\(listener.redirectURI.port ?? 0)"])
                let begin = PendingSignIn(
                    flowID: id,
                    grant: grant,
                    verificationURI: request.url.absoluteString,
                    verificationURIComplete: nil,
                    userCode: nil,
                    authorizationURL: request.url.absoluteString,
                    expiresAt: deadline
                )
                return .success(Started(begin: begin, work: .browser(request, listener), deadline: deadline))
            case .password, .clientCredentials, .jwtBearer, .tokenExchange:
                throw AuthGateError(.unsupportedGrant, "The \(grant.rawValue) grant is not interactive; use login.")
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: The run

    private func run(_ id: String, _ started: Started) async {
        guard let flow = flows[id] else { return started.close() }
        let client = flow.client
        let provider = flow.configuration.displayName
        let deadline = started.deadline
        let logger = logger
        let flowMetadata = flow.key.logMetadata(["flow.id": "\(id)"])
        let result: Result<SignInResult, AuthGateError>? = await withTaskGroup(of: Result<SignInResult, AuthGateError>?.self) { group in
            group.addTask { await Self.perform(started.work, client: client, provider: provider, logger: logger, metadata: flowMetadata) }
            group.addTask {
                do {
                    try await Task.sleep(for: .milliseconds(max(0, Int(deadline.timeIntervalSinceNow * 1000))))
                } catch {
                    return nil
                }
                return .failure(AuthGateError(.flowExpired, "The sign-in to \(provider) was not completed in time; start it again."))
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        started.close()
        // nil: cancelled, and whoever cancelled recorded the outcome — or the listener stopped
        // on its own, which must not leave the flow pending (finish ignores ended flows).
        await finish(
            id,
            result ?? .failure(AuthGateError(.internalError, "The sign-in to \(provider) stopped unexpectedly; start it again.")),
            client: client
        )
    }

    /// Polls the device code, or serves the redirect; `nil` when cancelled.
    private static func perform(
        _ work: Work,
        client: any IdentityProvider,
        provider: String,
        logger: Logger,
        metadata: Logger.Metadata
    ) async -> Result<SignInResult, AuthGateError>? {
        switch work {
        case .device(let authorization, let scopes):
            return await client.awaitDeviceAuthorization(authorization, scopes: scopes)
        case .browser(let request, let listener):
            let claim = Claim()
            let firstRefusal = Claim()
            return await listener.serve { uid in
                // Once per flow: another user may open connections as fast as it likes.
                guard firstRefusal.take() else { return }
                logger.notice(
                    "redirect refused: a program of another user (uid \(uid.map(String.init) ?? "unknown")) connected to the sign-in's loopback port; later ones are refused unlogged",
                    metadata: metadata
                )
            } handle: { (query: [String: String]) -> (RedirectPage, Result<SignInResult, AuthGateError>?) in
                guard request.carriesState(query) else {
                    // Never the query itself: it may hold someone's authorization code.
                    logger.notice("redirect refused: its state does not match the pending sign-in", metadata: metadata)
                    return (.foreignState(provider: provider), nil)
                }
                // Only one response per sign-in is redeemed, however many arrive at once.
                guard claim.take() else {
                    return (.alreadyCompleting, nil)
                }
                switch await client.completeAuthorization(query, request: request) {
                case .ignored(let why):
                    return (.failed(why), nil)
                case .finished(.success(let signIn)):
                    return (.signedIn(provider: provider), .success(signIn))
                case .finished(.failure(let error)):
                    return (.failed(error.message), .failure(error))
                }
            }
        }
    }

    /// Stores the session of a successful flow, or its error.
    /// - Parameter client: The flow's provider client, which revokes the tokens of a flow that
    ///   ended meanwhile (cancelled, perhaps forgotten since).
    private func finish(_ id: String, _ result: Result<SignInResult, AuthGateError>, client: any IdentityProvider) async {
        guard let flow = flows[id], flow.outcome == nil else {
            // Cancelled while the provider was answering: the tokens it issued must not outlive it.
            if case .success(let signIn) = result { await client.revoke(signIn.tokens) }
            return
        }
        let key = flow.key
        switch result {
        case .success(let signIn):
            // Storing awaits the session manager: a cancel meanwhile must not report success
            // for a flow that then signs in.
            flows[id]?.isFinishing = true
            let binding = SessionBinding(flow.configuration, client: flow.client)
            let stored: (SignedInSession, replaced: TokenSet?)
            do {
                stored = try await sessions.storeUnlessRetired(signIn, grant: flow.grant, binding: binding, for: key, consent: flow.consent)
            } catch {
                record(id, .failure(error))
                await flow.client.revoke(signIn.tokens)
                return
            }
            let (login, replaced) = stored
            record(id, .success(login))
            metrics?.signIn(provider: key.provider, grant: flow.grant, outcome: nil)
            logger.info("signed in", metadata: key.logMetadata(["flow.id": "\(id)", "session.subject": "\(signIn.subject ?? "-")"]))
            // The previous session of this name is gone; its refresh token must not outlive it.
            if let replaced { await flow.client.revoke(replaced) }
        case .failure(let error):
            record(id, .failure(error))
            metrics?.signIn(provider: key.provider, grant: flow.grant, outcome: error.reason)
            logger.notice(
                error.reason == .flowExpired ? "sign-in expired" : "sign-in failed",
                metadata: key.logMetadata(["flow.id": "\(id)", "error.reason": "\(error.reason.rawValue)"])
            )
        }
    }

    private func record(_ id: String, _ outcome: Result<SignedInSession, AuthGateError>) {
        guard let key = flows[id]?.key, flows[id]?.outcome == nil else { return }
        flows[id]?.outcome = outcome
        flows[id]?.finishedAt = now()
        if pending[key] == id { pending[key] = nil }
        let finished = flows.filter { $0.value.key.uid == key.uid && $0.value.finishedAt != nil && waiters[$0.key] == nil }
        if finished.count > settings.maximumFinishedPerUser {
            let oldest = finished.sorted { ($0.value.finishedAt ?? .distantPast) < ($1.value.finishedAt ?? .distantPast) }
            for (old, _) in oldest.prefix(finished.count - settings.maximumFinishedPerUser) where old != id { flows[old] = nil }
        }
        for waiter in (waiters.removeValue(forKey: id) ?? [:]).values {
            waiter.yield()
            waiter.finish()
        }
    }

    // MARK: login.complete and login.cancel

    /// The outcome of the caller's flow, `nil` while it is pending.
    /// - Throws: `flow_expired` when there is no such flow of this uid (never was, or gone).
    func outcome(of id: String, uid: UInt32) throws(AuthGateError) -> Result<SignedInSession, AuthGateError>? {
        guard let flow = flows[id], flow.key.uid == uid else { throw Self.notFound }
        return flow.outcome
    }

    /// Callers waiting for one flow's end at once (`login.complete`): a client that opens
    /// connections in a loop, each waiting and left, holds at most these (a request lives until
    /// its answer is written, and a client that merely closes may look like one that half-closed).
    static let maximumWaitersPerFlow = 8

    /// The flow's outcome if it has ended, else a stream that yields once when it does, and
    /// the waiter's number for ``stopWaiting(_:waiter:)``. The stream's iteration ends when
    /// the waiting task is cancelled (the daemon's stop).
    /// - Throws: `flow_expired` for no such flow of this uid; `rate_limited` when
    ///   ``maximumWaitersPerFlow`` wait for it already.
    func outcomeOrWait(_ id: String, uid: UInt32) throws(AuthGateError) -> (Result<SignedInSession, AuthGateError>?, (AsyncStream<Void>, waiter: Int)?) {
        guard let flow = flows[id], flow.key.uid == uid else { throw Self.notFound }
        if let outcome = flow.outcome { return (outcome, nil) }
        guard (waiters[id]?.count ?? 0) < Self.maximumWaitersPerFlow else {
            throw AuthGateError(
                .rateLimited,
                "\(Self.maximumWaitersPerFlow) requests wait for this sign-in already; wait with one of them (or with a timeout_seconds).",
                retryAfterSeconds: 5
            )
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        nextWaiter += 1
        waiters[id, default: [:]][nextWaiter] = continuation
        return (nil, (stream, nextWaiter))
    }

    /// Forgets a waiter that stopped waiting (its timeout), so that a client calling
    /// `login.complete` with short timeouts in a loop does not pile them up.
    func stopWaiting(_ id: String, waiter: Int) {
        waiters[id]?.removeValue(forKey: waiter)?.finish()
    }

    /// Ends the caller's pending flow: its tasks are cancelled and its listener closed.
    /// - Returns: False when it had already ended.
    func cancel(_ id: String, uid: UInt32) throws(AuthGateError) -> Bool {
        guard let flow = flows[id], flow.key.uid == uid else { throw Self.notFound }
        guard flow.outcome == nil, !flow.isFinishing else { return false }
        flow.start.cancel()
        flow.run?.cancel()
        record(id, .failure(AuthGateError(.loginCancelled, "The sign-in to \(flow.configuration.displayName) was cancelled.")))
        logger.notice("sign-in cancelled", metadata: flow.key.logMetadata(["flow.id": "\(id)"]))
        return true
    }

    /// A reload removed or changed `provider`: its pending sign-ins end (`login_cancelled`),
    /// since they were begun with a client, issuer and rules it may no longer have (a session
    /// they stored would outlive a narrowed `access`, or hand out another issuer's tokens).
    func endSignIns(provider: ProviderID) {
        for (id, flow) in flows where flow.key.provider == provider && flow.outcome == nil && !flow.isFinishing {
            flow.start.cancel()
            flow.run?.cancel()
            record(
                id,
                .failure(
                    AuthGateError(
                        .loginCancelled,
                        "The sign-in to \(flow.configuration.displayName) was ended: an administrator changed the provider meanwhile; sign in again."
                    )
                )
            )
            logger.notice("sign-in ended: its provider was changed or removed", metadata: flow.key.logMetadata(["flow.id": "\(id)"]))
        }
    }

    /// Forgets finished flows whose outcome has been kept long enough.
    func purge() {
        let cutoff = now().addingTimeInterval(-settings.retention)
        for (id, flow) in flows {
            if let finishedAt = flow.finishedAt, finishedAt < cutoff { flows[id] = nil }
        }
    }

    /// Cancels every pending flow and waits until their listeners are closed.
    func shutdown() async {
        isShutDown = true
        for (id, flow) in flows where flow.outcome == nil && !flow.isFinishing {
            flow.start.cancel()
            flow.run?.cancel()
            record(id, .failure(AuthGateError(.serviceUnavailable, "authgated stopped before the sign-in was completed.")))
        }
        for flow in flows.values {
            if case .success(let started) = await flow.start.value { started.close() }
            await flow.run?.value
        }
    }

    /// How many flows are pending (`authgate_login_flows_pending`).
    var pendingCount: Int { pending.count }

    static let notFound = AuthGateError(
        .flowExpired,
        "There is no pending sign-in with this flow_id: it expired or was never started; start the sign-in again."
    )

}

/// Taken once: the first response with the right state is the one redeemed.
private final class Claim: Sendable {
    private let taken = Atomic<Bool>(false)

    func take() -> Bool {
        !taken.exchange(true, ordering: .acquiringAndReleasing)
    }
}
