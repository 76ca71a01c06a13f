import AuthGateCore
import AuthGateRPC
import AuthGateServer
import Logging

/// Consent (``ConsentKeeper``): asked by every method that hands out a session's token, chosen at
/// sign-in, and `consent.list` / `consent.revoke`.
extension MethodHandlers {
    /// Allows the caller to have `key`'s tokens, asking the user when the session asks first
    /// and no answer covers the caller. Called by every way to a token: `token`,
    /// `credential.get`, `token.exchange`, `token.watch`, `token.rejected`, `dpop.proof` and
    /// `userinfo`.
    func requireConsent(_ configuration: ProviderConfiguration, _ key: SessionKey) async throws(AuthGateError) {
        guard services.consent.requiresConsent(key, configuration) else { return }
        try await services.consent.check(caller, key, providerName: configuration.displayName)
    }

    /// `login`'s and `login.begin`'s `confirm`, taken before the sign-in, so that the session's
    /// first token is never published for the cached path.
    func choose(_ confirm: Bool?, for key: SessionKey) {
        guard let confirm else { return }
        services.consent.choose(key, confirm: confirm)
        if confirm { services.broadcast.withdraw(key) }
    }

    func consentList() async -> ConsentListResult {
        services.consent.list(uid: caller.uid)
    }

    func consentRevoke(_ params: ConsentRevokeParams) async throws(AuthGateError) -> ConsentRevokeResult {
        if let provider = params.provider, ProviderID(provider) == nil {
            throw .validationFailed([FieldError(field: "provider", message: "must be a provider id")])
        }
        if let session = params.session, SessionName(session) == nil {
            throw .validationFailed([FieldError(field: "session", message: "must be 1–64 characters of letters, digits, '.', '_' or '-'")])
        }
        if let executable = params.executable, !executable.hasPrefix("/") || executable.utf8.count > 4096 {
            throw .validationFailed([FieldError(field: "executable", message: "must be an absolute path")])
        }
        let revoked = services.consent.revoke(uid: caller.uid, provider: params.provider, session: params.session, executable: params.executable)
        if revoked > 0 {
            services.logger.notice("consent answers revoked", metadata: ["peer.uid": "\(caller.uid)", "consent.revoked": "\(revoked)"])
        }
        return ConsentRevokeResult(revoked: revoked)
    }
}
