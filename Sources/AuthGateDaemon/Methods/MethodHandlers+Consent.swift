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
        let callerGone = watchSink.map { sink in { (body: @escaping @Sendable () -> Void) in sink.onClose(body) } }
        try await services.consent.check(caller, key, providerName: configuration.displayName, callerGone: callerGone)
    }

    /// `login`'s and `login.begin`'s `confirm`: what the sign-in does with the session's
    /// consent choice. Asking applies at once to a session that exists (and to the new one,
    /// before its first token is published), whatever becomes of the sign-in; no longer asking
    /// only when a sign-in a person made (a password, a device or browser sign-in) succeeds, and
    /// never for a service grant, which any program of the uid can make.
    func consentChoice(_ confirm: Bool?, for key: SessionKey, grant: Grant) async throws(AuthGateError) -> ConsentChoice {
        switch confirm {
        case nil:
            return .keep
        case true?:
            await services.sessions.askConsent(key)
            return .ask
        case false?:
            if grant.isService, await services.sessions.asksConsent(key) {
                throw AuthGateError(
                    .permissionDenied,
                    "The session asks before programs get its tokens; only a sign-in you make yourself (password, device or browser) can stop that, not a \(grant.rawValue) sign-in."
                )
            }
            return .stopAsking
        }
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
