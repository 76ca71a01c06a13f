import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// Signing in: `login` (password and the service grants), the interactive flows
/// (`login.begin`, `login.complete`, `login.cancel`) and `register`.
extension MethodHandlers {
    func login(_ params: LoginParams) async throws(AuthGateError) -> LoginResult {
        let (configuration, client, key) = try await resolve(params.provider, params.session)
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
            try await services.throttle.begin(uid: caller.uid, countInFlight: !caller.isUnbounded)
            do {
                let result = try await signIn(key, configuration, client, grant: grant, consent: consent) { provider throws(AuthGateError) in
                    try await provider.signIn(credentials)
                }
                await services.throttle.end(uid: caller.uid, .success)
                return result
            } catch {
                await services.throttle.end(uid: caller.uid, error.reason == .invalidCredentials ? .wrongPassword : .other)
                throw error
            }
        case .clientCredentials, .jwtBearer, .tokenExchange:
            let variant = TokenVariant(scopes: params.scopes ?? [])
            try variant.validate()
            return try await signIn(key, configuration, client, grant: grant, consent: consent) { provider throws(AuthGateError) in
                try await provider.signInAsService(grant, variant, proofKey: nil)
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

    func loginBegin(_ params: LoginBeginParams) async throws(AuthGateError) -> LoginBeginResult {
        let (configuration, client, key) = try await resolve(params.provider, params.session)
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
        if !caller.isUnbounded { try await services.sessions.ensureRoom(for: key) }
        let pending = try await services.providerShare.run(for: caller) { () throws(AuthGateError) in
            try await services.flows.begin(
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
    func loginComplete(_ params: LoginCompleteParams) async throws(AuthGateError) -> LoginResult {
        if let timeout = params.timeoutSeconds, !(1...3600).contains(timeout) {
            throw AuthGateError(.invalidParams, "\"timeout_seconds\" must be between 1 and 3600.")
        }
        let (finished, waiting) = try await services.flows.outcomeOrWait(params.flowID, uid: caller.uid)
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
        await services.flows.stopWaiting(params.flowID, waiter: waiter)
        if let outcome = try await services.flows.outcome(of: params.flowID, uid: caller.uid) {
            return LoginResult(try outcome.get())
        }
        if Task.isCancelled { throw AuthGateError(.serviceUnavailable, "authgated is stopping.") }
        throw AuthGateError(.loginPending, "The sign-in is still waiting for you; call login.complete again to keep waiting.")
    }

    func loginCancel(_ params: LoginCancelParams) async throws(AuthGateError) -> LoginCancelResult {
        LoginCancelResult(cancelled: try await services.flows.cancel(params.flowID, uid: caller.uid))
    }

    func register(_ params: RegisterParams) async throws(AuthGateError) -> LoginResult {
        let (configuration, client, key) = try await resolve(params.provider, params.session)
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
        return try await signIn(key, configuration, client, grant: .password, event: "registered and signed in") { provider throws(AuthGateError) in
            try await provider.register(registration)
        }
    }

    func signIn(
        _ key: SessionKey,
        _ configuration: ProviderConfiguration,
        _ client: any IdentityProvider,
        grant: Grant,
        event: String = "signed in",
        consent: ConsentChoice = .keep,
        reservingRoom: Bool = true,
        _ perform: (any IdentityProvider) async throws(AuthGateError) -> SignInResult
    ) async throws(AuthGateError) -> LoginResult {
        let bounded = reservingRoom && !caller.isUnbounded
        if bounded { try await services.sessions.reserveRoom(for: key) }
        let signIn: SignInResult
        do {
            signIn = try await services.providerShare.run(for: caller) { () throws(AuthGateError) in try await perform(client) }
        } catch {
            if bounded { await services.sessions.releaseRoom(for: key) }
            services.metrics?.signIn(provider: key.provider, grant: grant, outcome: error.reason)
            services.logger.notice("sign-in refused", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
            throw error
        }
        services.metrics?.signIn(provider: key.provider, grant: grant, outcome: nil)
        let binding = SessionBinding(configuration, client: client)
        let (result, replaced) = await services.sessions.store(signIn, grant: grant, binding: binding, for: key, consent: consent)
        if bounded { await services.sessions.releaseRoom(for: key) }
        services.logger.info("\(event)", metadata: metadata(key, ["session.subject": "\(signIn.subject ?? "-")"]))
        if let replaced {
            // The previous session of this name is gone; its refresh token must not outlive it.
            await client.revoke(replaced)
        }
        return LoginResult(result)
    }
}

extension RefreshStatistics {
    init(_ report: RefreshReport) {
        self.init(
            inFlight: report.inFlight,
            waiting: report.waiting,
            started: report.started,
            latenessP50Seconds: report.latenessP50Seconds,
            latenessP99Seconds: report.latenessP99Seconds,
            latenessMaxSeconds: report.latenessMaxSeconds
        )
    }
}

extension LoginBeginResult {
    init(_ pending: PendingSignIn) {
        self.init(
            flowID: pending.flowID,
            grant: pending.grant,
            verificationURI: pending.verificationURI,
            verificationURIComplete: pending.verificationURIComplete,
            userCode: pending.userCode,
            authorizationURL: pending.authorizationURL,
            expiresAt: pending.expiresAt
        )
    }
}

extension LoginResult {
    init(_ signedIn: SignedInSession) {
        self.init(
            provider: signedIn.key.provider.rawValue,
            session: signedIn.key.name.rawValue,
            state: signedIn.state,
            expiresAt: signedIn.expiresAt,
            subject: signedIn.subject,
            displayName: signedIn.displayName,
            notice: signedIn.notSaved.map {
                "The session could not be saved to disk (\($0)): it lasts until the daemon stops, and `authgate status` says so until a save succeeds."
            }
        )
    }
}

extension SessionStatus {
    /// - Parameter showingUID: An administrator's list of everyone's sessions names each one's uid.
    init(_ summary: SessionSummary, showingUID: Bool) {
        self.init(
            provider: summary.provider,
            session: summary.session,
            state: summary.state,
            expiresAt: summary.expiresAt,
            nextRefreshAt: summary.nextRefreshAt,
            lastError: summary.lastError,
            subject: summary.subject,
            displayName: summary.displayName,
            uid: showingUID ? summary.key.uid : nil,
            refreshOverdueSeconds: summary.refreshOverdueSeconds,
            dpopJKT: summary.dpopThumbprint,
            notSaved: summary.notSaved
        )
    }
}
