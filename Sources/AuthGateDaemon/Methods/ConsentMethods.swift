import AuthGateCore
import AuthGateRPC
import AuthGateServer
import Logging

/// `consent.list` and `consent.revoke`: a caller's kept answers (``ConsentKeeper``).
struct ConsentMethods: Sendable {
    let consent: ConsentKeeper
    let logger: Logger

    func consentList(from caller: MethodCaller) async -> ConsentListResult {
        consent.list(uid: caller.uid)
    }

    func consentRevoke(_ params: ConsentRevokeParams, from caller: MethodCaller) async throws(AuthGateError) -> ConsentRevokeResult {
        if let provider = params.provider, ProviderID(provider) == nil {
            throw .validationFailed([FieldError(field: "provider", message: "must be a provider id")])
        }
        if let session = params.session, SessionName(session) == nil {
            throw .validationFailed([FieldError(field: "session", message: "must be 1–64 characters of letters, digits, '.', '_' or '-'")])
        }
        if let executable = params.executable, !executable.hasPrefix("/") || executable.utf8.count > 4096 {
            throw .validationFailed([FieldError(field: "executable", message: "must be an absolute path")])
        }
        let revoked = consent.revoke(uid: caller.uid, provider: params.provider, session: params.session, executable: params.executable)
        if revoked > 0 {
            logger.notice("consent answers revoked", metadata: ["peer.uid": "\(caller.uid)", "consent.revoked": "\(revoked)"])
        }
        return ConsentRevokeResult(revoked: revoked)
    }
}

extension ConsentKeeper {
    /// Allows the caller to have `key`'s tokens, asking the user when the session asks first
    /// and no answer covers the caller. Called by every way to a token: `token`,
    /// `credential.get`, `token.exchange`, `token.watch`, `token.rejected`, `dpop.proof` and
    /// `userinfo`.
    func require(_ configuration: ProviderConfiguration, _ key: SessionKey, for caller: MethodCaller) async throws(AuthGateError) {
        guard requiresConsent(key, configuration) else { return }
        let callerGone = caller.watchSink.map { sink in { (body: @escaping @Sendable () -> Void) in _ = sink.onClose(body) } }
        try await check(caller.credentials, key, providerName: configuration.displayName, callerGone: callerGone)
    }
}
