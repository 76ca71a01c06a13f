import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// A caller's sessions: `userinfo`, `status` and `logout`.
extension MethodHandlers {
    func userinfo(_ params: UserinfoParams) async throws(AuthGateError) -> [String: JSONValue] {
        let (configuration, client, key) = try await resolve(params.provider, params.session)
        try await requireConsent(configuration, key)
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
        guard let tokens = removed else { return LogoutResult(removed: true) }
        do {
            let (_, client) = try await services.registry.usableProvider(params.provider, for: caller)
            return LogoutResult(removed: true, revocation: RevocationReport(await client.revokeReporting(tokens)))
        } catch {
            // Tokens that were never offered to the provider are not "nothing to revoke".
            return LogoutResult(removed: true, revocation: RevocationReport(status: .failed, message: "\(error.message) [\(error.reason.rawValue)]"))
        }
    }
}
