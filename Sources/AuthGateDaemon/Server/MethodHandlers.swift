import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import FoundationEssentials
import Logging
import NIOPosix

/// The RPC methods, for one caller. Each returns a result or throws ``AuthGateError``.
struct MethodHandlers {
    let services: DaemonServices
    let caller: PeerCredentials
    /// The connection, for `token.watch`; `nil` where there is none (in-process callers).
    var watchSink: WatchSink?

    func providersList() async -> [ProviderInfo] {
        await services.registry.visible(to: caller).map(ProviderInfo.init)
    }

    func login(_ params: LoginParams) async throws(AuthGateError) -> LoginResult {
        let (configuration, client, key) = try await resolve(params.provider, params.session)
        let grant = params.grant ?? .password
        guard configuration.grants.contains(grant) else {
            let allowed = configuration.grants.map(\.rawValue).joined(separator: ", ")
            throw AuthGateError(.unsupportedGrant, "The provider '\(configuration.id)' does not allow the \(grant.rawValue) grant (it allows: \(allowed)).")
        }
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
                let result = try await signIn(key, configuration, client, grant: grant) { provider throws(AuthGateError) in
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
            return try await signIn(key, configuration, client, grant: grant) { provider throws(AuthGateError) in
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
        if !caller.isUnbounded { try await services.sessions.ensureRoom(for: key) }
        let pending = try await services.providerShare.run(for: caller) { () throws(AuthGateError) in
            try await services.flows.begin(
                key: key,
                grant: grant,
                scopes: variant.scopes,
                prompt: params.prompt,
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

    private func signIn(
        _ key: SessionKey,
        _ configuration: ProviderConfiguration,
        _ client: any IdentityProvider,
        grant: Grant,
        event: String = "signed in",
        _ perform: (any IdentityProvider) async throws(AuthGateError) -> SignInResult
    ) async throws(AuthGateError) -> LoginResult {
        if !caller.isUnbounded { try await services.sessions.ensureRoom(for: key) }
        let signIn: SignInResult
        do {
            signIn = try await services.providerShare.run(for: caller) { () throws(AuthGateError) in try await perform(client) }
        } catch {
            services.metrics?.signIn(provider: key.provider, grant: grant, outcome: error.reason)
            services.logger.notice("sign-in refused", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
            throw error
        }
        services.metrics?.signIn(provider: key.provider, grant: grant, outcome: nil)
        let binding = SessionBinding(configuration, client: client)
        let (result, replaced) = await services.sessions.store(signIn, grant: grant, binding: binding, for: key)
        services.logger.info("\(event)", metadata: metadata(key, ["session.subject": "\(signIn.subject ?? "-")"]))
        if let replaced {
            // The previous session of this name is gone; its refresh token must not outlive it.
            await client.revoke(replaced)
        }
        return LoginResult(result)
    }

    func token(_ params: TokenParams) async throws(AuthGateError) -> TokenResult {
        guard params.waitForSignIn == nil else {
            throw AuthGateError(.invalidParams, "\"wait_for_sign_in\" is for token.watch only; token answers at once.")
        }
        return try await token(
            params.provider,
            params.session,
            TokenVariant(scopes: params.scopes ?? [], resource: params.resource),
            minValidSeconds: params.minValidSeconds,
            forceRefresh: params.forceRefresh
        )
    }

    /// `credential.get`: the provider whose `credential_helper` lists `host` for `tool` (and,
    /// among several on one host, whose `paths` the request's `path` is under:
    /// ``CredentialHost/select(host:path:tool:among:)``), and the token of its session the
    /// request's `username` names, else of its default session (none when it needs a
    /// sign-in); `nil` when no provider the caller may use matches.
    func credentialGet(_ params: CredentialParams) async throws(AuthGateError) -> CredentialResult? {
        guard let host = CredentialHost.normalize(params.host) else {
            throw .validationFailed([FieldError(field: "host", message: "must be a host name or address with an optional :port")])
        }
        guard ProviderConfiguration.CredentialHelper.allTools.contains(params.tool) else {
            throw .validationFailed([FieldError(field: "tool", message: "must be git or docker")])
        }
        if let path = params.path, path.utf8.count > 4096 || path.containsControlCharacters {
            throw .validationFailed([FieldError(field: "path", message: "must be at most 4096 bytes without control characters")])
        }
        let helpers = await services.registry.visible(to: caller).compactMap { provider in
            provider.configuration.flatMap { configuration in configuration.credentialHelper.map { (configuration.id, $0) } }
        }
        guard case .helper(let index, _) = CredentialHost.select(host: host, path: params.path, tool: params.tool, among: helpers.map(\.1)) else {
            return nil
        }
        let (provider, helper) = helpers[index]
        // The user name git sends chooses the caller's own session of that name, when there is
        // one; any other (or the provider's own user name) leaves the default session.
        var session: String?
        if let username = params.username, username != helper.username, let name = SessionName(username), name != .default,
            await services.sessions.exists(SessionKey(uid: caller.uid, provider: provider, name: name))
        {
            session = username
        }
        let answer = { (token: TokenResult?) in
            CredentialResult(
                provider: provider.rawValue,
                username: session ?? helper.username,
                session: session,
                authtype: helper.authType == .basic ? nil : helper.authType.rawValue,
                token: token
            )
        }
        do {
            return answer(try await token(TokenParams(provider: provider.rawValue, session: session, minValidSeconds: params.minValidSeconds)))
        } catch  where error.reason == .loginRequired {
            return answer(nil)
        }
    }

    /// `token` and `token.exchange`: the session's own token or one of its variants.
    private func token(
        _ provider: String,
        _ session: String?,
        _ variant: TokenVariant,
        minValidSeconds: Int?,
        forceRefresh: Bool?
    ) async throws(AuthGateError) -> TokenResult {
        let (configuration, client, key) = try await resolve(provider, session)
        let minimum = minValidSeconds ?? TokenParams.defaultMinimumValidity
        guard TokenParams.minimumValidityRange.contains(minimum) else {
            throw AuthGateError(.invalidParams, "\"min_valid_seconds\" must be between 0 and 86400.")
        }
        try variant.validate()
        if let exchange = variant.exchange, let policy = configuration.settings.remote?.tokenExchange {
            try Self.check(exchange, against: policy, provider: configuration.id)
        }
        let read = { () async throws(AuthGateError) -> TokenSet in
            try await services.sessions.token(
                for: key,
                minimumValidity: TimeInterval(minimum),
                forceRefresh: forceRefresh ?? false,
                variant: variant,
                bounded: !caller.isUnbounded,
                caller: caller
            )
        }
        do {
            return TokenResult(try await read())
        } catch  where error.reason == .loginRequired && configuration.signsInAsClient {
            // A service's provider: its session is the client's own token, got now (the
            // session then lives and is re-acquired like one `authgate login --client-credentials` made).
            try await signInOnFirstUse(key, configuration, client)
            return TokenResult(try await read())
        }
    }

    /// The service sign-in (client credentials, or a platform token's grant) of a session first
    /// asked for a token (single flight per session: ``FirstUseSignIns``).
    private func signInOnFirstUse(_ key: SessionKey, _ configuration: ProviderConfiguration, _ client: any IdentityProvider) async throws(AuthGateError) {
        let handlers = self
        let grant = configuration.serviceGrant ?? .clientCredentials
        try await services.firstUse.signIn(key) {
            do throws(AuthGateError) {
                _ = try await handlers.signIn(key, configuration, client, grant: grant, event: "signed in on first use") {
                    provider throws(AuthGateError) in
                    try await provider.signInAsService(grant, TokenVariant(), proofKey: nil)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
    }

    /// `token`, and from then on `token.changed` and `session.ended` on this connection until it
    /// closes. The watch starts before the token is read, so no change falls between the two.
    /// With `wait_for_sign_in`, a session that does not exist (`login_required`) is waited for:
    /// the answer comes with the first token a sign-in gives, or never if the connection closes.
    func tokenWatch(_ params: TokenParams) async throws(AuthGateError) -> TokenResult {
        guard params.scopes == nil, params.resource == nil, params.forceRefresh == nil else {
            throw AuthGateError(
                .invalidParams,
                "token.watch watches a session's own token: it takes provider, session, min_valid_seconds and wait_for_sign_in only."
            )
        }
        guard let watchSink else { throw AuthGateError(.invalidRequest, "token.watch needs a connection to send its notifications on.") }
        let (_, _, key) = try await resolve(params.provider, params.session)
        let watchers = services.broadcast.watchers
        let id = try watchers.add(key, sink: watchSink, caller: caller, bounded: !caller.isUnbounded)
        watchSink.onClose { watchers.remove(key, id: id) }
        while true {
            do throws(AuthGateError) {
                let result = try await token(
                    params.provider,
                    params.session,
                    TokenVariant(),
                    minValidSeconds: params.minValidSeconds,
                    forceRefresh: nil
                )
                // Only a watch that answered makes the connection a watching one (never idle): a
                // refused watch leaves it an ordinary connection, with its deadlines.
                watchSink.started()
                watchSink.willAnswer(with: result.accessToken.exposedValue)
                services.logger.debug("token watch started", metadata: metadata(key))
                return result
            } catch  where error.reason == .loginRequired && params.waitForSignIn == true {
                // A request in progress is never idle: the connection stays open while it waits.
                guard await watchers.waitForChange(key, watch: id) else {
                    watchers.remove(key, id: id)
                    throw error
                }
            } catch {
                watchers.remove(key, id: id)
                throw error
            }
        }
    }

    func tokenRejected(_ params: TokenRejectedParams) async throws(AuthGateError) -> TokenResult {
        let (_, _, key) = try await resolve(params.provider, params.session)
        let tokens = try await services.sessions.tokenRejected(for: key, rejected: params.accessToken, bounded: !caller.isUnbounded)
        return TokenResult(tokens)
    }

    func tokenExchange(_ params: TokenExchangeParams) async throws(AuthGateError) -> TokenResult {
        let variant = TokenVariant(
            scopes: params.scopes ?? [],
            resource: params.resource,
            exchange: .init(audience: params.audience, requestedTokenType: params.requestedTokenType)
        )
        return try await token(params.provider, params.session, variant, minValidSeconds: params.minValidSeconds, forceRefresh: params.forceRefresh)
    }

    /// The provider file's `token_exchange` rules, before any request.
    private static func check(_ exchange: TokenVariant.TokenExchange, against policy: TokenExchangePolicy, provider: ProviderID) throws(AuthGateError) {
        if let audiences = policy.audiences, let audience = exchange.audience, !audiences.contains(audience) {
            throw AuthGateError(
                .permissionDenied,
                "The provider '\(provider)' allows token exchange for the audiences \(audiences.joined(separator: ", ")) only (its file's token_exchange.audiences)."
            )
        }
        if let type = exchange.requestedTokenType, !policy.requestedTokenTypes.contains(type) {
            throw AuthGateError(
                .permissionDenied,
                "The provider '\(provider)' allows token exchange for the token types \(policy.requestedTokenTypes.joined(separator: ", ")) only (its file's token_exchange.requested_token_types)."
            )
        }
    }

    /// A proof for the caller's own request; the key stays here. Only the session's owner can
    /// ask: sessions are looked up under the caller's uid.
    func dpopProof(_ params: DPoPProofParams) async throws(AuthGateError) -> DPoPProofResult {
        // The parameters first: a bad one is invalid_params whether or not there is a session.
        var fields: [FieldError] = []
        // RFC 9110 §5.6.2: a method is a token; proofs are for the usual ones.
        if params.htm.isEmpty || params.htm.utf8.count > 16 || !params.htm.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
            fields.append(FieldError(field: "htm", message: "must be an HTTP method in capitals, like GET or POST"))
        }
        let url = URL(string: params.htu)
        if params.htu.utf8.count > 4096 || url?.host == nil || !(url?.scheme == "https" || url?.scheme == "http") {
            fields.append(FieldError(field: "htu", message: "must be the request's absolute http(s) URL"))
        }
        if let nonce = params.nonce, !DPoPKey.isValidNonce(nonce) {
            fields.append(
                FieldError(
                    field: "nonce",
                    message: "must be the DPoP-Nonce the server sent: 1 to 1024 printable ASCII characters, no space, quote or backslash (RFC 9449 §8.1)"
                )
            )
        }
        guard fields.isEmpty, let url else {
            throw AuthGateError(
                .invalidParams,
                "The proof's parameters were refused: "
                    + fields.map { "\($0.field) \($0.message)" }.joined(separator: "; ") + ".",
                fields: fields
            )
        }
        let (_, _, key) = try await resolve(params.provider, params.session)
        let (proofKey, accessToken) = try await services.sessions.proofKey(for: key, presenting: params.accessToken, bounded: !caller.isUnbounded)
        services.logger.debug("dpop proof made", metadata: metadata(key, ["dpop.htm": "\(params.htm)"]))
        return DPoPProofResult(
            proof: proofKey.proof(method: params.htm, url: url, nonce: params.nonce, accessToken: accessToken, at: Date()),
            jkt: proofKey.thumbprint
        )
    }

    func userinfo(_ params: UserinfoParams) async throws(AuthGateError) -> [String: JSONValue] {
        let (_, client, key) = try await resolve(params.provider, params.session)
        let tokens = try await services.sessions.token(
            for: key,
            minimumValidity: TimeInterval(TokenParams.defaultMinimumValidity),
            forceRefresh: false,
            bounded: !caller.isUnbounded
        )
        return try await services.providerShare.run(for: caller) { () throws(AuthGateError) in try await client.userinfo(tokens) }
    }

    func status(_ params: StatusParams) async throws(AuthGateError) -> [SessionStatus] {
        var provider: ProviderID?
        if let name = params.provider {
            guard let id = ProviderID(name) else { throw .unknownProvider(name) }
            provider = id
        }
        guard params.all == true else {
            return await services.sessions.status(uid: caller.uid, provider: provider).map { SessionStatus($0, showingUID: false) }
        }
        try requireAdmin("list every user's sessions")
        return await services.sessions.status(uid: nil, provider: provider).map { SessionStatus($0, showingUID: true) }
    }

    func logout(_ params: LogoutParams) async throws(AuthGateError) -> LogoutResult {
        guard let id = ProviderID(params.provider) else { throw .unknownProvider(params.provider) }
        let key = try sessionKey(id, params.session)
        guard let removed = await services.sessions.remove(key) else {
            return LogoutResult(removed: false)
        }
        services.logger.info("signed out", metadata: metadata(key))
        // Revocation is best effort: the local session is gone whatever the provider says.
        if let tokens = removed, let (_, client) = try? await services.registry.usableProvider(params.provider, for: caller) {
            return LogoutResult(removed: true, revocation: RevocationReport(await client.revokeReporting(tokens)))
        }
        return LogoutResult(removed: true)
    }

    /// Admins only: reads `providers.d` again and answers with the per-provider report.
    func configReload() async throws(AuthGateError) -> [ProviderReloadReport] {
        try requireAdmin("reload the providers")
        services.logger.notice("reload requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        return try await services.reloader.reload().map(ProviderReloadReport.init)
    }

    /// Administrators only: an issuer's discovery document, fetched here (the CLI links no
    /// HTTP client), with the checks a provider's validation makes.
    func providerDiscover(_ params: ProviderDiscoverParams) async throws(AuthGateError) -> ProviderOffer {
        try requireAdmin("run discovery for a new provider")
        let caBundle = try readCABundle(params.caFile)
        let metadata = try await ProviderDiscovery.discover(issuer: params.issuer, caBundle: caBundle)
        return ProviderOffer(
            issuer: params.issuer,
            tokenEndpoint: metadata.tokenEndpoint.absoluteString,
            authorizationEndpoint: metadata.authorizationEndpoint?.absoluteString,
            deviceAuthorizationEndpoint: metadata.deviceAuthorizationEndpoint?.absoluteString,
            pushedAuthorizationRequestEndpoint: metadata.pushedAuthorizationRequestEndpoint?.absoluteString,
            requirePushedAuthorizationRequests: metadata.requirePushedAuthorizationRequests,
            registrationEndpoint: metadata.registrationEndpoint?.absoluteString,
            grantTypes: metadata.grantTypesSupported,
            grants: Grant.allCases.filter { metadata.grantTypesSupported?.contains($0.wireName) ?? true },
            codeChallengeMethods: metadata.codeChallengeMethodsSupported,
            dpopSigningAlgs: metadata.dpopSigningAlgValuesSupported,
            tokenEndpointAuthMethods: metadata.tokenEndpointAuthMethodsSupported,
            scopes: metadata.scopesSupported
        )
    }

    /// Administrators only: the metrics as Prometheus's text exposition.
    func metrics() async throws(AuthGateError) -> MetricsResult {
        try requireAdmin("read the metrics")
        guard let exposition = services.exposition else { throw AuthGateError(.methodNotFound, "This daemon keeps no metrics (it runs with --no-metrics).") }
        return MetricsResult(contentType: MetricsExposition.contentType, text: await exposition.text())
    }

    /// Administrators only: every sessions file sealed again under a new storage key, which
    /// then replaces the old one where it lives (``SessionPersistence/rekey()``).
    func storageRekey() async throws(AuthGateError) -> StorageRekeyResult {
        try requireAdmin("change the storage key")
        guard let persistence = services.persistence else { throw AuthGateError(.storageUnavailable, "This daemon has no session store.") }
        services.logger.notice("rekey requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        // Child processes, fsyncs and the store's lock: off the event loops and the actors' threads.
        let outcome: Result<SessionPersistence.RekeyOutcome, StorageError>
        do {
            outcome = try await NIOThreadPool.singleton.runIfActive { () -> Result<SessionPersistence.RekeyOutcome, StorageError> in
                do throws(StorageError) { return .success(try persistence.rekey()) } catch { return .failure(error) }
            }
        } catch {
            throw AuthGateError(.serviceUnavailable, "authgated is stopping.")
        }
        switch outcome {
        case .success(let done):
            return StorageRekeyResult(
                storageKey: done.location.kind,
                files: done.report.files,
                sessions: done.report.sessions,
                unreadableFiles: done.report.unreadable.count
            )
        case .failure(let failure):
            services.logger.error("rekey failed: \(failure)")
            throw AuthGateError(.storageUnavailable, failure.message)
        }
    }

    func daemonInfo() async -> DaemonInfo {
        let isAdmin = services.context.servesAdmin && AccessPolicy().isAdmin(caller, adminGroup: services.context.adminGroup)
        let uptime = ContinuousClock.now - services.context.startedAt
        return DaemonInfo(
            version: AuthGateVersion.current,
            uptimeSeconds: Int(uptime.components.seconds),
            providers: await services.registry.visible(to: caller).count,
            sessions: await services.sessions.count(uid: caller.uid == 0 ? nil : caller.uid),
            configDir: services.context.configDirectory,
            mode: services.context.mode.rawValue,
            socket: services.context.socketPath,
            daemonUID: UInt32(geteuid()),
            daemonGID: UInt32(getegid()),
            cachedTokenAnswers: isAdmin ? services.broadcast.published.answerCount : nil,
            refresh: isAdmin ? RefreshStatistics(await services.sessions.refreshStatistics()) : nil,
            metricsListener: isAdmin
                ? services.metricsListener?.current.map { MetricsListenerInfo(address: $0.address, serving: $0.serving, error: $0.problem) } : nil,
            storageKey: services.persistence?.keyLocation?.kind
        )
    }

    /// The provider the caller names, if the caller may use it, and the caller's session key there.
    func resolve(_ provider: String, _ session: String?) async throws(AuthGateError) -> (ProviderConfiguration, any IdentityProvider, SessionKey) {
        let (configuration, client) = try await services.registry.usableProvider(provider, for: caller)
        return (configuration, client, try sessionKey(configuration.id, session))
    }

    private func sessionKey(_ provider: ProviderID, _ session: String?) throws(AuthGateError) -> SessionKey {
        guard let name = session.map(SessionName.init) ?? .default else {
            throw .validationFailed([FieldError(field: "session", message: "must be 1–64 characters of letters, digits, '.', '_' or '-'")])
        }
        return SessionKey(uid: caller.uid, provider: provider, name: name)
    }

    func metadata(_ key: SessionKey, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        key.logMetadata(extra.merging(["peer.pid": "\(caller.pid)"]) { mine, _ in mine })
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
            displayName: signedIn.displayName
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
            uid: showingUID ? summary.key.uid : nil,
            refreshOverdueSeconds: summary.refreshOverdueSeconds,
            dpopJKT: summary.dpopThumbprint
        )
    }
}
