import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// Signing in: `login` (password and the service grants), the interactive flows
/// (`login.begin`, `login.complete`, `login.cancel`) and `register`.
struct SignInMethods: Sendable {
    let registry: ProviderRegistry
    let sessions: SessionManager
    let flows: LoginFlowManager
    let throttle: LoginThrottle
    let providerShare: ProviderRequestShare
    /// The limits of a service provider's sign-ins, which an explicit `login` with a service's
    /// grant is held to as a first use is.
    let firstUse: FirstUseSignIns
    /// Where each sign-in's end is counted; `nil` where nothing is.
    var metrics: (any SignInObserver)?
    let logger: Logger

    func login(_ params: LoginParams, from caller: MethodCaller) async throws(AuthGateError) -> LoginResult {
        let (configuration, client, key) = try await caller.resolve(params.provider, params.session, in: registry)
        let grant = params.grant ?? .password
        guard configuration.grants.contains(grant) else {
            let allowed = configuration.grants.map(\.rawValue).joined(separator: ", ")
            throw AuthGateError(.unsupportedGrant, "The provider '\(configuration.id)' does not allow the \(grant.rawValue) grant (it allows: \(allowed)).")
        }
        let consent = try await consentChoice(params.confirm, for: key, grant: grant)
        switch grant {
        case .password:
            let credentials = PasswordCredentials(
                username: params.username ?? "",
                password: params.password ?? Secret(""),
                scopes: params.scopes ?? []
            )
            try credentials.validate()
            try await throttle.begin(uid: caller.uid, countInFlight: !caller.isUnbounded)
            do {
                let result = try await signIn(key, configuration, client, grant: grant, consent: consent, for: caller) { provider throws(AuthGateError) in
                    try await provider.signIn(credentials)
                }
                await throttle.end(uid: caller.uid, .success)
                return result
            } catch {
                await throttle.end(uid: caller.uid, error.reason == .invalidCredentials ? .wrongPassword : .other)
                throw error
            }
        case .clientCredentials, .jwtBearer, .tokenExchange:
            let variant = TokenVariant(scopes: params.scopes ?? [])
            try variant.validate()
            // The provider's one client, shared by every uid: a login loop must not hammer it.
            try await firstUse.admitExplicit(key, bounded: !caller.isUnbounded)
            do {
                let result = try await signIn(key, configuration, client, grant: grant, consent: consent, for: caller) { provider throws(AuthGateError) in
                    try await provider.signInAsService(grant, variant, proofKey: nil)
                }
                await firstUse.settled(key, nil)
                return result
            } catch {
                await firstUse.settled(key, error)
                throw error
            }
        case .deviceCode, .authorizationCode:
            throw AuthGateError(
                .unsupportedGrant,
                "The \(grant.rawValue) grant is interactive: use login.begin, then login.complete (`authgate login \(configuration.id) --\(grant == .deviceCode ? "device" : "browser")`)."
            )
        }
    }

    /// OpenID Connect `prompt` values a caller may ask for (Core §3.1.2.1, Initiating User
    /// Registration 1.0 for `create`). `none` is left out: it cannot show the user anything.
    static let allowedPrompts: Set<String> = ["create", "login", "consent", "select_account"]

    func loginBegin(_ params: LoginBeginParams, from caller: MethodCaller) async throws(AuthGateError) -> LoginBeginResult {
        let (configuration, client, key) = try await caller.resolve(params.provider, params.session, in: registry)
        let grant = params.grant
        guard grant == .deviceCode || grant == .authorizationCode else {
            throw .validationFailed([FieldError(field: "grant", message: "must be device_code or authorization_code (use login for \(grant.rawValue))")])
        }
        if let prompt = params.prompt {
            guard grant == .authorizationCode else {
                throw .validationFailed([FieldError(field: "prompt", message: "applies to the authorization_code grant only")])
            }
            guard Self.allowedPrompts.contains(prompt) else {
                throw .validationFailed([FieldError(field: "prompt", message: "must be one of: \(Self.allowedPrompts.sorted().joined(separator: ", "))")])
            }
        }
        guard configuration.grants.contains(grant) else {
            let allowed = configuration.grants.map(\.rawValue).joined(separator: ", ")
            throw AuthGateError(.unsupportedGrant, "The provider '\(configuration.id)' does not allow the \(grant.rawValue) grant (it allows: \(allowed)).")
        }
        let variant = TokenVariant(scopes: params.scopes ?? [])
        try variant.validate()
        let consent = try await consentChoice(params.confirm, for: key, grant: grant)
        if !caller.isUnbounded { try await sessions.ensureRoom(for: key) }
        let pending = try await providerShare.run(for: caller.credentials) { () throws(AuthGateError) in
            try await flows.begin(
                key: key,
                grant: grant,
                scopes: variant.scopes,
                prompt: params.prompt,
                consent: consent,
                configuration: configuration,
                client: client
            )
        }
        return LoginBeginResult(pending)
    }

    /// Waits for the caller's flow to end, at most `timeout_seconds`.
    /// - Throws: The flow's error; `login_pending` when it is still pending at the timeout
    ///   (call again); `flow_expired` for an unknown or forgotten flow.
    func loginComplete(_ params: LoginCompleteParams, from caller: MethodCaller) async throws(AuthGateError) -> LoginResult {
        if let timeout = params.timeoutSeconds, !(1...3600).contains(timeout) {
            throw AuthGateError(.invalidParams, "\"timeout_seconds\" must be between 1 and 3600.")
        }
        let (finished, waiting) = try await flows.outcomeOrWait(params.flowID, uid: caller.uid)
        if let finished { return LoginResult(try finished.get()) }
        guard let (updates, waiter) = waiting else { throw AuthGateError(.internalError, "The sign-in has neither an outcome nor a way to wait for one.") }
        // Wait for the flow's end, the timeout, or this connection's end (shutdown), whichever
        // comes first; every child ends promptly when cancelled.
        let timeout = params.timeoutSeconds
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in updates { return }
            }
            if let timeout {
                group.addTask { try? await Task.sleep(for: .seconds(timeout)) }
            }
            await group.next()
            group.cancelAll()
        }
        await flows.stopWaiting(params.flowID, waiter: waiter)
        if let outcome = try await flows.outcome(of: params.flowID, uid: caller.uid) {
            return LoginResult(try outcome.get())
        }
        if Task.isCancelled { throw AuthGateError(.serviceUnavailable, "authgated is stopping.") }
        throw AuthGateError(.loginPending, "The sign-in is still waiting for you; call login.complete again to keep waiting.")
    }

    func loginCancel(_ params: LoginCancelParams, from caller: MethodCaller) async throws(AuthGateError) -> LoginCancelResult {
        LoginCancelResult(cancelled: try await flows.cancel(params.flowID, uid: caller.uid))
    }

    func register(_ params: RegisterParams, from caller: MethodCaller) async throws(AuthGateError) -> LoginResult {
        let (configuration, client, key) = try await caller.resolve(params.provider, params.session, in: registry)
        guard case .mock = configuration.settings else {
            throw AuthGateError(
                .unsupportedGrant,
                "Registration with '\(configuration.id)' happens on the provider's own sign-up page: `authgate register \(configuration.id)` opens it (login.begin with the authorization_code grant and prompt \"create\")."
            )
        }
        let registration = Registration(
            username: params.username ?? "",
            email: params.email ?? "",
            password: params.password ?? Secret(""),
            passwordConfirmation: params.passwordConfirmation ?? Secret("")
        )
        return try await signIn(key, configuration, client, grant: .password, event: "registered and signed in", for: caller) {
            provider throws(AuthGateError) in
            try await provider.register(registration)
        }
    }

    /// A sign-in by `perform` at the provider, within the caller's share of provider requests,
    /// and its session stored; counted and logged either way. A new session's room is held
    /// around it unless `reservingRoom` is false (a first-use sign-in holds it itself).
    func signIn(
        _ key: SessionKey,
        _ configuration: ProviderConfiguration,
        _ client: any IdentityProvider,
        grant: Grant,
        event: String = "signed in",
        consent: ConsentChoice = .keep,
        reservingRoom: Bool = true,
        for caller: MethodCaller,
        _ perform: (any IdentityProvider) async throws(AuthGateError) -> SignInResult
    ) async throws(AuthGateError) -> LoginResult {
        let bounded = reservingRoom && !caller.isUnbounded
        if bounded { try await sessions.reserveRoom(for: key) }
        let signIn: SignInResult
        do {
            signIn = try await providerShare.run(for: caller.credentials) { () throws(AuthGateError) in try await perform(client) }
        } catch {
            if bounded { await sessions.releaseRoom(for: key) }
            metrics?.signIn(provider: key.provider, grant: grant, outcome: error.reason)
            logger.notice("sign-in refused", metadata: caller.metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
            throw error
        }
        metrics?.signIn(provider: key.provider, grant: grant, outcome: nil)
        let binding = SessionBinding(configuration, client: client)
        let stored: (SignedInSession, replaced: TokenSet?)
        do {
            stored = try await sessions.storeUnlessRetired(signIn, grant: grant, binding: binding, for: key, consent: consent)
        } catch {
            if bounded { await sessions.releaseRoom(for: key) }
            if await providerShare.revoking(for: caller.credentials, { await client.revoke(signIn.tokens) }) == nil {
                logger.warning("a sign-in's tokens were not revoked: too many of the uid's revocations wait", metadata: caller.metadata(key))
            }
            throw error
        }
        let (result, replaced) = stored
        if bounded { await sessions.releaseRoom(for: key) }
        logger.info("\(event)", metadata: caller.metadata(key, ["session.subject": "\(signIn.subject ?? "-")"]))
        if let replaced {
            // The previous session of this name is gone; its refresh token must not outlive it.
            if await providerShare.revoking(for: caller.credentials, { await client.revoke(replaced) }) == nil {
                logger.warning("a replaced session's tokens were not revoked: too many of the uid's revocations wait", metadata: caller.metadata(key))
            }
        }
        return LoginResult(result)
    }

    /// `login`'s and `login.begin`'s `confirm`: what the sign-in does with the session's
    /// consent choice. Asking applies at once to a session that exists (and to the new one,
    /// before its first token is published), whatever becomes of the sign-in; no longer asking
    /// only when a sign-in a person made (a password, a device or browser sign-in) succeeds, and
    /// never for a service grant, which any program of the uid can make.
    private func consentChoice(_ confirm: Bool?, for key: SessionKey, grant: Grant) async throws(AuthGateError) -> ConsentChoice {
        switch confirm {
        case nil:
            return .keep
        case true?:
            await sessions.askConsent(key)
            return .ask
        case false?:
            if grant.isService, await sessions.asksConsent(key) {
                throw AuthGateError(
                    .permissionDenied,
                    "The session asks before programs get its tokens; only a sign-in you make yourself (password, device or browser) can stop that, not a \(grant.rawValue) sign-in."
                )
            }
            return .stopAsking
        }
    }
}
