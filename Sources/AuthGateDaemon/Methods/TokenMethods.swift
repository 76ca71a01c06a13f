import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// Handing out tokens: `token` (with a service's first-use sign-in), `credential.get`,
/// `token.watch`, `token.rejected`, `token.exchange` and `dpop.proof`.
struct TokenMethods: Sendable {
    let registry: ProviderRegistry
    let sessions: SessionManager
    let consent: ConsentKeeper
    /// The `token.watch` subscriptions.
    let watchers: TokenWatchers
    /// The sign-ins of service providers' sessions on first use.
    let firstUse: FirstUseSignIns
    /// How a first-use sign-in signs in.
    let signIn: SignInMethods
    let logger: Logger

    func token(_ params: TokenParams, from caller: MethodCaller) async throws(AuthGateError) -> TokenResult {
        guard params.waitForSignIn == nil else {
            throw AuthGateError(.invalidParams, "\"wait_for_sign_in\" is for token.watch only; token answers at once.")
        }
        return try await token(
            params.provider,
            params.session,
            TokenVariant(scopes: params.scopes ?? [], resource: params.resource),
            minValidSeconds: params.minValidSeconds,
            forceRefresh: params.forceRefresh,
            for: caller
        )
    }

    /// `credential.get`: the provider whose `credential_helper` lists `host` for `tool` (and,
    /// among several on one host, whose `paths` the request's `path` is under:
    /// ``CredentialHost/select(host:path:tool:among:)``), and the token of its session the
    /// request's `username` names, else of its default session (none when it needs a
    /// sign-in); `nil` when no provider the caller may use matches.
    func credentialGet(_ params: CredentialParams, from caller: MethodCaller) async throws(AuthGateError) -> CredentialResult? {
        guard let host = CredentialHost.normalize(params.host) else {
            throw .validationFailed([FieldError(field: "host", message: "must be a host name or address with an optional :port")])
        }
        guard ProviderConfiguration.CredentialHelper.allTools.contains(params.tool) else {
            throw .validationFailed([FieldError(field: "tool", message: "must be git or docker")])
        }
        if let path = params.path, path.utf8.count > 4096 || path.containsControlCharacters {
            throw .validationFailed([FieldError(field: "path", message: "must be at most 4096 bytes without control characters")])
        }
        let helpers = await registry.visible(to: caller.credentials).compactMap { provider in
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
            await sessions.exists(SessionKey(uid: caller.uid, provider: provider, name: name))
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
            return answer(try await token(TokenParams(provider: provider.rawValue, session: session, minValidSeconds: params.minValidSeconds), from: caller))
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
        forceRefresh: Bool?,
        for caller: MethodCaller
    ) async throws(AuthGateError) -> TokenResult {
        let (configuration, _, key) = try await caller.resolve(provider, session, in: registry)
        let minimum = minValidSeconds ?? TokenParams.defaultMinimumValidity
        guard TokenParams.minimumValidityRange.contains(minimum) else {
            throw AuthGateError(.invalidParams, "\"min_valid_seconds\" must be between 0 and 86400.")
        }
        try variant.validate()
        if let exchange = variant.exchange, let policy = configuration.settings.remote?.tokenExchange {
            try Self.check(exchange, against: policy, provider: configuration.id)
        }
        try await consent.require(configuration, key, for: caller)
        let read = { () async throws(AuthGateError) -> TokenSet in
            try await sessions.token(
                for: key,
                minimumValidity: TimeInterval(minimum),
                forceRefresh: forceRefresh ?? false,
                variant: variant,
                bounded: !caller.isUnbounded,
                caller: caller.credentials
            )
        }
        do {
            return TokenResult(try await read())
        } catch  where error.reason == .loginRequired && configuration.signsInAsClient {
            // A service's provider: its session is the client's own token, got now (the
            // session then lives and is re-acquired like one `authgate login --client-credentials` made).
            try await signInOnFirstUse(key, configuration, for: caller)
            return TokenResult(try await read())
        }
    }

    /// The service sign-in (client credentials, or a platform token's grant) of a session first
    /// asked for a token (single flight per session, rate-limited per uid: ``FirstUseSignIns``).
    /// The session's room is held here, around it, so that a uid at its limit is refused before
    /// and apart from the sign-in (whose refusals, the provider's, are remembered).
    private func signInOnFirstUse(_ key: SessionKey, _ configuration: ProviderConfiguration, for caller: MethodCaller) async throws(AuthGateError) {
        let bounded = !caller.isUnbounded
        let registry = registry
        let signInNow: @Sendable () async -> Result<Void, AuthGateError> = {
            do throws(AuthGateError) {
                // The provider as it is now: the sign-in may have waited out the first-use spread,
                // during which a reload may have changed its client or narrowed its access.
                let (configuration, client) = try await registry.usableProvider(key.provider.rawValue, for: caller.credentials)
                guard configuration.signsInAsClient else { throw .loginRequired(provider: key.provider.rawValue) }
                let grant = configuration.serviceGrant ?? .clientCredentials
                _ = try await signIn.signIn(key, configuration, client, grant: grant, event: "signed in on first use", reservingRoom: false, for: caller) {
                    provider throws(AuthGateError) in
                    try await provider.signInAsService(grant, TokenVariant(), proofKey: nil)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        if bounded { try await sessions.reserveRoom(for: key) }
        do {
            try await firstUse.signIn(key, bounded: bounded, policy: configuration.refresh, isSignedIn: { await sessions.hasTokens(key) }, signInNow)
        } catch {
            if bounded { await sessions.releaseRoom(for: key) }
            throw error
        }
        if bounded { await sessions.releaseRoom(for: key) }
    }

    /// `token`, and from then on `token.changed` and `session.ended` on this connection until it
    /// closes. The watch starts before the token is read, so no change falls between the two.
    /// With `wait_for_sign_in`, a session that does not exist (`login_required`) is waited for:
    /// the answer comes with the first token a sign-in gives, or never if the connection closes.
    func tokenWatch(_ params: TokenParams, from caller: MethodCaller) async throws(AuthGateError) -> TokenResult {
        guard params.scopes == nil, params.resource == nil, params.forceRefresh == nil else {
            throw AuthGateError(
                .invalidParams,
                "token.watch watches a session's own token: it takes provider, session, min_valid_seconds and wait_for_sign_in only."
            )
        }
        guard let watchSink = caller.watchSink else { throw AuthGateError(.invalidRequest, "token.watch needs a connection to send its notifications on.") }
        let (configuration, _, key) = try await caller.resolve(params.provider, params.session, in: registry)
        let id = try watchers.add(key, sink: watchSink, caller: caller.credentials, bounded: !caller.isUnbounded)
        let closing = watchSink.onClose { watchers.remove(key, id: id) }
        while true {
            do throws(AuthGateError) {
                let result = try await token(
                    params.provider,
                    params.session,
                    TokenVariant(),
                    minValidSeconds: params.minValidSeconds,
                    forceRefresh: nil,
                    for: caller
                )
                // The user was asked (the token came): later tokens of a session that asks go on.
                if consent.requiresConsent(key, configuration) { watchers.consented(key, id: id) }
                // Only a watch that answered makes the connection a watching one (never idle): a
                // refused watch leaves it an ordinary connection, with its deadlines.
                watchSink.started()
                watchSink.willAnswer(with: result.accessToken.exposedValue)
                logger.debug("token watch started", metadata: caller.metadata(key))
                return result
            } catch  where error.reason == .loginRequired && params.waitForSignIn == true {
                // A request in progress is never idle: the connection stays open while it waits.
                guard await watchers.waitForChange(key, watch: id) else {
                    watchers.remove(key, id: id)
                    watchSink.cancelOnClose(closing)
                    throw error
                }
            } catch {
                watchers.remove(key, id: id)
                watchSink.cancelOnClose(closing)
                throw error
            }
        }
    }

    func tokenRejected(_ params: TokenRejectedParams, from caller: MethodCaller) async throws(AuthGateError) -> TokenResult {
        let (configuration, _, key) = try await caller.resolve(params.provider, params.session, in: registry)
        try await consent.require(configuration, key, for: caller)
        let tokens = try await sessions.tokenRejected(for: key, rejected: params.accessToken, bounded: !caller.isUnbounded)
        return TokenResult(tokens)
    }

    func tokenExchange(_ params: TokenExchangeParams, from caller: MethodCaller) async throws(AuthGateError) -> TokenResult {
        let variant = TokenVariant(
            scopes: params.scopes ?? [],
            resource: params.resource,
            exchange: .init(audience: params.audience, requestedTokenType: params.requestedTokenType)
        )
        return try await token(
            params.provider,
            params.session,
            variant,
            minValidSeconds: params.minValidSeconds,
            forceRefresh: params.forceRefresh,
            for: caller
        )
    }

    /// The provider file's `token_exchange` rules, before any request.
    static func check(_ exchange: TokenVariant.TokenExchange, against policy: TokenExchangePolicy, provider: ProviderID) throws(AuthGateError) {
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
    func dpopProof(_ params: DPoPProofParams, from caller: MethodCaller) async throws(AuthGateError) -> DPoPProofResult {
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
        let (configuration, _, key) = try await caller.resolve(params.provider, params.session, in: registry)
        try await consent.require(configuration, key, for: caller)
        let (proofKey, accessToken) = try await sessions.proofKey(for: key, presenting: params.accessToken, bounded: !caller.isUnbounded)
        logger.debug("dpop proof made", metadata: caller.metadata(key, ["dpop.htm": "\(params.htm)"]))
        return DPoPProofResult(
            proof: proofKey.proof(method: params.htm, url: url, nonce: params.nonce, accessToken: accessToken, at: Date()),
            jkt: proofKey.thumbprint
        )
    }
}
