import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// A caller's sessions: `userinfo`, `status`, `logout` and `session.inspect`.
struct SessionMethods: Sendable {
    let registry: ProviderRegistry
    let sessions: SessionManager
    let consent: ConsentKeeper
    let providerShare: ProviderRequestShare
    let admin: AdminCheck
    let logger: Logger

    func userinfo(_ params: UserinfoParams, from caller: MethodCaller) async throws(AuthGateError) -> [String: JSONValue] {
        let (configuration, client, key) = try await caller.resolve(params.provider, params.session, in: registry)
        try await consent.require(configuration, key, for: caller)
        let tokens = try await sessions.token(
            for: key,
            minimumValidity: TimeInterval(TokenParams.defaultMinimumValidity),
            forceRefresh: false,
            bounded: !caller.isUnbounded
        )
        return try await providerShare.run(for: caller.credentials) { () throws(AuthGateError) in try await client.userinfo(tokens) }
    }

    func status(_ params: StatusParams, from caller: MethodCaller) async throws(AuthGateError) -> [SessionStatus] {
        var provider: ProviderID?
        if let name = params.provider {
            guard let id = ProviderID(name) else { throw .unknownProvider(name) }
            provider = id
        }
        guard params.all == true else {
            return await sessions.status(uid: caller.uid, provider: provider).map { SessionStatus($0, showingUID: false) }
        }
        try admin.require("list every user's sessions", of: caller)
        return await sessions.status(uid: nil, provider: provider).map { SessionStatus($0, showingUID: true) }
    }

    func logout(_ params: LogoutParams, from caller: MethodCaller) async throws(AuthGateError) -> LogoutResult {
        guard let id = ProviderID(params.provider) else { throw .unknownProvider(params.provider) }
        let key = try caller.sessionKey(id, params.session)
        guard let removed = await sessions.remove(key) else {
            return LogoutResult(removed: false)
        }
        logger.info("signed out", metadata: caller.metadata(key))
        // Revocation is best effort: the local session is gone whatever the provider says.
        guard let tokens = removed else { return LogoutResult(removed: true) }
        do {
            let (_, client) = try await registry.usableProvider(params.provider, for: caller.credentials)
            guard let revoked = await providerShare.revoking(for: caller.credentials, { await client.revokeReporting(tokens) }) else {
                logger.warning("a signed-out session's tokens were not revoked: too many of the uid's revocations wait", metadata: caller.metadata(key))
                return LogoutResult(
                    removed: true,
                    revocation: RevocationReport(
                        status: .failed,
                        message: "Too many of your sessions' revocations are waiting; this one was not made. [rate_limited]"
                    )
                )
            }
            return LogoutResult(removed: true, revocation: RevocationReport(revoked))
        } catch {
            // Tokens that were never offered to the provider are not "nothing to revoke".
            return LogoutResult(removed: true, revocation: RevocationReport(status: .failed, message: "\(error.message) [\(error.reason.rawValue)]"))
        }
    }

    /// `session.inspect`: what the provider gave one of the caller's own sessions (sessions are
    /// looked up under the caller's uid), never a token: for `authgate provider test`. With
    /// `refresh`, a forced refresh first; with `userinfo`, a userinfo request.
    func sessionInspect(_ params: SessionInspectParams, from caller: MethodCaller) async throws(AuthGateError) -> SessionInspection {
        let (configuration, _, key) = try await caller.resolve(params.provider, params.session, in: registry)
        guard let (grant, tokens, obtainedAt) = await sessions.inspection(of: key) else {
            throw .loginRequired(provider: key.provider.rawValue)
        }
        var refresh: RefreshFacts?
        if params.refresh == true {
            refresh = await forcedRefresh(key, grant: grant, before: tokens, for: caller)
        }
        var userinfo: UserinfoFacts?
        if params.userinfo == true {
            do throws(AuthGateError) {
                let claims = try await self.userinfo(UserinfoParams(provider: params.provider, session: params.session), from: caller)
                userinfo = UserinfoFacts(status: .answered, claims: claims.keys.sorted())
            } catch  where error.reason == .unsupportedGrant {
                userinfo = UserinfoFacts(status: .notOffered, error: InspectionProblem(reason: error.reason, message: error.message))
            } catch {
                userinfo = UserinfoFacts(status: .failed, error: InspectionProblem(reason: error.reason, message: error.message))
            }
        }
        let current = await sessions.inspection(of: key)?.tokens ?? tokens
        let neverExpires = tokens.expiresAt == .distantFuture
        logger.debug("session inspected", metadata: caller.metadata(key))
        return SessionInspection(
            provider: key.provider.rawValue,
            session: key.name.rawValue,
            grant: grant,
            tokenType: current.tokenType,
            expiresAt: current.expiresAt == .distantFuture ? nil : current.expiresAt,
            accessTokenLifetimeSeconds: neverExpires ? nil : Int(tokens.expiresAt.timeIntervalSince(obtainedAt).rounded()),
            scopesRequested: configuration.scopes,
            scopesGranted: tokens.scopes.isEmpty ? configuration.scopes : tokens.scopes,
            idTokenExpected: configuration.kind == .oidc && configuration.scopes.contains("openid") && !grant.isService,
            idToken: tokens.idToken.flatMap(Self.facts(ofVerified:)),
            refreshToken: tokens.refreshToken != nil,
            refresh: refresh,
            userinfo: userinfo,
            dpop: DPoPFacts(
                required: configuration.settings.remote?.dpop == .required,
                bound: current.proofKey != nil && current.tokenType.lowercased() == "dpop",
                jkt: current.proofKey?.thumbprint
            )
        )
    }

    /// A forced refresh of the session's own token, and whether it rotated the refresh token.
    private func forcedRefresh(_ key: SessionKey, grant: Grant, before: TokenSet, for caller: MethodCaller) async -> RefreshFacts {
        // client_credentials sessions are obtained again; others need their refresh token.
        guard grant.isService || before.refreshToken != nil else { return RefreshFacts(status: .notPossible) }
        do {
            _ = try await sessions.token(for: key, minimumValidity: 0, forceRefresh: true, bounded: !caller.isUnbounded, caller: caller.credentials)
        } catch {
            return RefreshFacts(status: .failed, error: InspectionProblem(reason: error.reason, message: error.message))
        }
        guard !grant.isService else { return RefreshFacts(status: .refreshed) }
        let after = await sessions.inspection(of: key)?.tokens.refreshToken
        return RefreshFacts(status: .refreshed, rotated: after != before.refreshToken)
    }

    /// The header's `alg` and `kid`, the `iss` and `aud`, and the claims' names of an ID token
    /// the daemon verified when it came (a session holds no other).
    static func facts(ofVerified idToken: Secret) -> IDTokenFacts? {
        let parts = idToken.exposedValue.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let header = Base64URL.decode(String(parts[0])).flatMap({ try? JSONValue.parse(Data($0)) })?.objectValue,
            let payload = Base64URL.decode(String(parts[1])).flatMap({ try? JSONValue.parse(Data($0)) })?.objectValue,
            let alg = header["alg"]?.stringValue, let iss = payload["iss"]?.stringValue
        else { return nil }
        let audience: [String]
        switch payload["aud"] {
        case .string(let one): audience = [one]
        case .array(let many): audience = many.compactMap(\.stringValue)
        default: audience = []
        }
        return IDTokenFacts(alg: alg, kid: header["kid"]?.stringValue, iss: iss, aud: audience, claims: payload.keys.sorted())
    }
}
