import AuthGateCore
import AuthGateRPC
import Foundation
import Logging

/// A session's identity: whose, at which provider, under which name.
///
/// The uid comes from the socket's peer credentials, so one uid never reaches another's
/// sessions whatever it sends.
struct SessionKey: Sendable, Hashable, Comparable {
    var uid: UInt32
    var provider: ProviderID
    var name: SessionName

    static func < (lhs: SessionKey, rhs: SessionKey) -> Bool {
        (lhs.uid, lhs.provider, lhs.name) < (rhs.uid, rhs.provider, rhs.name)
    }
}

/// One session's state; never leaves the daemon.
struct SessionRecord: Sendable {
    /// How the session was obtained: `client_credentials` sessions re-acquire instead of refreshing.
    var grant: Grant
    var tokens: TokenSet?
    var subject: String?
    var state: SessionState
    var lastError: String?
    /// Changes whenever the session is replaced or removed, so a refresh that finishes late
    /// cannot overwrite a newer sign-in.
    var generation: UInt64
}

/// Owns every session and every refresh in flight.
///
/// A refresh runs at most once per session at a time (single flight): callers who need the
/// same session refreshed await the same task, which this actor owns and cancels on shutdown.
actor SessionManager {
    private var sessions: [SessionKey: SessionRecord] = [:]
    private var refreshes: [SessionKey: Task<Result<TokenSet, AuthGateError>, Never>] = [:]
    private var nextGeneration: UInt64 = 1
    private let now: @Sendable () -> Date
    private let logger: Logger

    init(logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.logger = logger
        self.now = now
    }

    /// Stores a fresh sign-in, replacing any session of the same key.
    /// - Returns: The result for the caller, and the replaced tokens (to revoke).
    func store(_ signIn: SignInResult, grant: Grant, for key: SessionKey) -> (LoginResult, replaced: TokenSet?) {
        let replaced = sessions[key]?.tokens
        refreshes.removeValue(forKey: key)?.cancel()
        sessions[key] = SessionRecord(grant: grant, tokens: signIn.tokens, subject: signIn.subject, state: .authenticated, lastError: nil,
                                      generation: takeGeneration())
        let result = LoginResult(provider: key.provider.rawValue, session: key.name.rawValue, state: .authenticated,
                                 expiresAt: signIn.tokens.expiresAt, subject: signIn.subject)
        return (result, replaced)
    }

    /// A token valid for at least `minimumValidity` seconds, refreshed first when needed.
    /// - Throws: `login_required` when there is no usable session; the provider's error when a
    ///   needed refresh failed and the current token has expired.
    func token(for key: SessionKey, provider: any IdentityProvider, minimumValidity: TimeInterval, forceRefresh: Bool) async throws(AuthGateError) -> TokenSet {
        guard let record = sessions[key], let tokens = record.tokens else {
            throw .loginRequired(provider: key.provider.rawValue)
        }
        if !forceRefresh, tokens.isValid(for: minimumValidity, at: now()) {
            return tokens
        }
        let renew: @Sendable () async throws(AuthGateError) -> TokenSet
        if record.grant == .clientCredentials {
            // RFC 6749 §4.4.3: no refresh token; the client simply asks again.
            renew = { () async throws(AuthGateError) in try await provider.signInAsClient(scopes: tokens.scopes).tokens }
        } else if let refreshToken = tokens.refreshToken {
            renew = { () async throws(AuthGateError) in try await provider.refresh(refreshToken, scopes: tokens.scopes) }
        } else {
            if tokens.isValid(for: 0, at: now()) { return tokens }
            sessions[key]?.tokens = nil
            sessions[key]?.state = .loginRequired
            throw .loginRequired(provider: key.provider.rawValue)
        }
        let task = refreshes[key] ?? startRefresh(key, generation: record.generation, renew: renew)
        switch await task.value {
        case .success(let refreshed):
            return refreshed
        case .failure(let error) where error.reason != .loginRequired && tokens.isValid(for: 0, at: now()):
            // The provider is unwell, but the current token still works: serve it until it expires.
            return tokens
        case .failure(let error):
            throw error
        }
    }

    /// A caller's API refused `rejected`. If it is still the current token, the session is
    /// refreshed (joining a refresh already in flight); if it was already replaced, the
    /// current token is returned without asking the provider.
    func tokenRejected(for key: SessionKey, provider: any IdentityProvider, rejected: Secret) async throws(AuthGateError) -> TokenSet {
        guard let tokens = sessions[key]?.tokens else { throw .loginRequired(provider: key.provider.rawValue) }
        guard tokens.accessToken == rejected else { return tokens }
        return try await token(for: key, provider: provider, minimumValidity: 0, forceRefresh: true)
    }

    private func startRefresh(_ key: SessionKey, generation: UInt64,
                              renew: @escaping @Sendable () async throws(AuthGateError) -> TokenSet) -> Task<Result<TokenSet, AuthGateError>, Never> {
        sessions[key]?.state = .refreshing
        let task = Task { () -> Result<TokenSet, AuthGateError> in
            let result: Result<TokenSet, AuthGateError>
            do throws(AuthGateError) {
                result = .success(try await renew())
            } catch {
                result = .failure(error)
            }
            self.finishRefresh(key, generation: generation, result: result)
            return result
        }
        refreshes[key] = task
        return task
    }

    private func finishRefresh(_ key: SessionKey, generation: UInt64, result: Result<TokenSet, AuthGateError>) {
        refreshes[key] = nil
        guard var record = sessions[key], record.generation == generation else { return }
        switch result {
        case .success(var tokens):
            // RFC 6749 §6: a server that issues no new refresh token leaves the old one valid.
            // A rotated one replaces it here, before any caller sees the new access token.
            if tokens.refreshToken == nil { tokens.refreshToken = record.tokens?.refreshToken }
            record.tokens = tokens
            record.state = .authenticated
            record.lastError = nil
            logger.info("session refreshed", metadata: metadata(key, ["session.expires_at": "\(tokens.expiresAt)"]))
        case .failure(let error) where error.reason == .loginRequired:
            record.tokens = nil
            record.state = .loginRequired
            record.lastError = error.message
            logger.notice("refresh refused; sign-in required", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
        case .failure(let error):
            let stillValid = record.tokens?.isValid(for: 0, at: now()) ?? false
            record.state = stillValid ? .authenticated : .expired
            record.lastError = error.message
            logger.warning("refresh failed", metadata: metadata(key, ["error.reason": "\(error.reason.rawValue)"]))
        }
        sessions[key] = record
    }

    /// Removes a session.
    /// - Returns: Its tokens, to revoke at the provider; `nil` when there was none.
    func remove(_ key: SessionKey) -> TokenSet?? {
        refreshes.removeValue(forKey: key)?.cancel()
        guard let record = sessions.removeValue(forKey: key) else { return nil }
        return .some(record.tokens)
    }

    /// The caller's sessions, optionally of one provider; never token values.
    func status(uid: UInt32, provider: ProviderID?) -> [SessionStatus] {
        sessions.filter { $0.key.uid == uid && (provider == nil || $0.key.provider == provider) }
            .sorted { $0.key < $1.key }
            .map { key, record in
                SessionStatus(provider: key.provider.rawValue, session: key.name.rawValue, state: record.state,
                              expiresAt: record.tokens?.expiresAt, nextRefreshAt: nil, lastError: record.lastError,
                              subject: record.subject)
            }
    }

    func count(uid: UInt32?) -> Int {
        guard let uid else { return sessions.count }
        return sessions.keys.count { $0.uid == uid }
    }

    /// Cancels every refresh in flight; part of the daemon's shutdown.
    func shutdown() {
        for task in refreshes.values { task.cancel() }
        refreshes.removeAll()
    }

    private func takeGeneration() -> UInt64 {
        defer { nextGeneration += 1 }
        return nextGeneration
    }

    private func metadata(_ key: SessionKey, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        extra.merging(["peer.uid": "\(key.uid)", "provider.id": "\(key.provider)", "session": "\(key.name)"]) { a, _ in a }
    }
}
