public import FoundationEssentials

/// A sign-in to perform with a username and a password.
public struct PasswordCredentials: Sendable {
    public var username: String
    public var password: Secret
    /// Scopes to ask for; empty means the provider's configured scopes.
    public var scopes: [String]

    public init(username: String, password: Secret, scopes: [String] = []) {
        self.username = username
        self.password = password
        self.scopes = scopes
    }

    /// `validation_failed` for empty fields, before anything is sent anywhere.
    public func validate() throws(AuthGateError) {
        var fields: [FieldError] = []
        if username.allSatisfy(\.isWhitespace) {
            fields.append(FieldError(field: "username", message: "must not be empty"))
        }
        if password.exposedValue.isEmpty {
            fields.append(FieldError(field: "password", message: "must not be empty"))
        }
        if !fields.isEmpty { throw .validationFailed(fields) }
    }
}

/// A new account to create (the seeds' registration screen).
public struct Registration: Sendable {
    public var username: String
    public var email: String
    public var password: Secret
    public var passwordConfirmation: Secret

    public init(username: String, email: String, password: Secret, passwordConfirmation: Secret) {
        self.username = username
        self.email = email
        self.password = password
        self.passwordConfirmation = passwordConfirmation
    }
}

/// Something that signs users in and refreshes their tokens: the mock provider here, OAuth 2.0
/// and OpenID Connect servers over HTTPS elsewhere.
///
/// Every method throws ``AuthGateError`` with a reason a user can act on.
public protocol IdentityProvider: Sendable {
    /// Signs in with the password grant (RFC 6749 §4.3) or its mock equivalent.
    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult

    /// Creates an account and signs it in. Providers whose users register on the provider's
    /// own sign-up page (OpenID Connect's `prompt=create`) keep the default, which refuses.
    func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult

    /// Obtains tokens for the client itself (RFC 6749 §4.4, `client_credentials`): the
    /// variant's scopes (the configured ones when it names none) and resource (RFC 8707).
    func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult

    /// The signed-in user's claims (OpenID Connect Core §5.3, the UserInfo endpoint).
    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue]

    /// Exchanges a refresh token for new tokens (RFC 6749 §6): the session's own when
    /// `variant` is empty, else narrower scopes or one resource (RFC 8707). A refused refresh
    /// token is `login_required`. When the answer names no scopes, the result's `scopes` is
    /// the variant's (empty for the session's own: the caller keeps the ones it had).
    func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet

    /// ``refresh(_:variant:)`` for a session whose tokens are bound to `proofKey` (DPoP).
    func refresh(_ refreshToken: Secret, variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> TokenSet

    /// Signs a service in with `grant` (one of the ``Grant/isService`` grants: client
    /// credentials, or a platform token for `jwt_bearer` and `token_exchange`), for a new
    /// session or again for one whose tokens are bound to `proofKey` (DPoP).
    func signInAsService(_ grant: Grant, _ variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> SignInResult

    /// Which version of the platform's token file a `grant` sign-in reads (`subject_token_file`,
    /// `assertion_file`): it changes when the platform rotates the file, and the session is then
    /// signed in again with the new token. `nil` when the grant reads no such file.
    func platformTokenRevision(for grant: Grant) -> String?

    /// Exchanges the session's access token for the token `variant.exchange` describes
    /// (RFC 8693). Providers without token exchange keep the default, which refuses.
    func exchange(_ tokens: TokenSet, for variant: TokenVariant) async throws(AuthGateError) -> TokenSet

    /// Revokes a refresh token (RFC 7009), best effort: failures are not reported.
    func revoke(_ tokens: TokenSet) async

    /// ``revoke(_:)``, saying how it went (`logout`'s `revocation`, `authgate provider test`).
    func revokeReporting(_ tokens: TokenSet) async -> RevocationOutcome

    // Interactive sign-ins; providers without them keep the defaults, which refuse.

    /// Starts a device authorization (RFC 8628 §3.1): the code and page to show the user.
    func beginDeviceAuthorization(scopes: [String]) async throws(AuthGateError) -> DeviceAuthorization

    /// Polls until the user has finished on the verification page (RFC 8628 §3.4, §3.5).
    /// - Returns: The sign-in or why it failed; `nil` when the calling task is cancelled.
    func awaitDeviceAuthorization(_ authorization: DeviceAuthorization, scopes: [String]) async -> Result<SignInResult, AuthGateError>?

    /// A fresh authorization request (PKCE, `state`, `nonce`) for a browser sign-in whose
    /// redirect comes back to `redirectURI`.
    func authorizationRequest(redirectURI: URL, scopes: [String], prompt: String?) async throws(AuthGateError) -> AuthorizationRequest

    /// Checks a redirect's parameters against `request` and, when they are its response,
    /// exchanges the code.
    func completeAuthorization(_ parameters: [String: String], request: AuthorizationRequest) async -> AuthorizationResponseOutcome
}

/// How a revocation at sign-out went (RFC 7009).
public enum RevocationOutcome: Sendable, Equatable {
    /// The provider answered 200: the token is revoked (or was not valid any more, §2.2).
    case revoked
    /// The provider has no revocation endpoint: the tokens expire on their own.
    case notOffered
    /// The provider answered, but not 200 (its HTTP status).
    case refused(status: Int)
    /// The request failed (the error's reason).
    case failed(ErrorReason)
    /// The provider does not say (providers that keep the default of ``IdentityProvider/revokeReporting(_:)``).
    case unknown
}

extension IdentityProvider {
    public func revokeReporting(_ tokens: TokenSet) async -> RevocationOutcome {
        await revoke(tokens)
        return .unknown
    }

    /// Providers without DPoP ignore the key.
    public func refresh(_ refreshToken: Secret, variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> TokenSet {
        try await refresh(refreshToken, variant: variant)
    }

    /// Providers without DPoP or workload identity: client credentials only.
    public func signInAsService(_ grant: Grant, _ variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> SignInResult {
        guard grant == .clientCredentials else {
            throw AuthGateError(.unsupportedGrant, "This provider does not sign services in with the \(grant.rawValue) grant.")
        }
        return try await signInAsClient(variant)
    }

    public func platformTokenRevision(for grant: Grant) -> String? { nil }

    public func exchange(_ tokens: TokenSet, for variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        throw AuthGateError(.unsupportedGrant, "This provider does not exchange tokens (RFC 8693).")
    }

    public func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult {
        throw AuthGateError(.unsupportedGrant, "This provider registers new accounts on its own sign-up page, not through authgated.")
    }

    public func beginDeviceAuthorization(scopes: [String]) async throws(AuthGateError) -> DeviceAuthorization {
        throw Self.notInteractive
    }

    public func awaitDeviceAuthorization(_ authorization: DeviceAuthorization, scopes: [String]) async -> Result<SignInResult, AuthGateError>? {
        .failure(Self.notInteractive)
    }

    public func authorizationRequest(redirectURI: URL, scopes: [String], prompt: String?) async throws(AuthGateError) -> AuthorizationRequest {
        throw Self.notInteractive
    }

    public func completeAuthorization(_ parameters: [String: String], request: AuthorizationRequest) async -> AuthorizationResponseOutcome {
        .finished(.failure(Self.notInteractive))
    }

    private static var notInteractive: AuthGateError {
        AuthGateError(.unsupportedGrant, "This provider has no interactive sign-in (device code or browser).")
    }
}
