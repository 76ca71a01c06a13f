public import FoundationEssentials

// The values of the interactive sign-ins that ``IdentityProvider`` offers: the device
// authorization grant (RFC 8628) and the authorization-code grant with PKCE on a loopback
// redirect (RFC 6749 §4.1, RFC 7636, RFC 8252). AuthGateOAuth makes and checks them.

/// What a device authorization endpoint answered (RFC 8628 §3.2): what to show the user, and
/// the device code to poll with, which never leaves the daemon.
public struct DeviceAuthorization: Sendable {
    /// `device_code`: proves the poller is the device the user approves; a secret.
    public var deviceCode: Secret
    /// `user_code`: what the user types on the verification page.
    public var userCode: String
    /// `verification_uri`.
    public var verificationURI: URL
    /// `verification_uri_complete`: the page with the code filled in, where the server gives one.
    public var verificationURIComplete: URL?
    /// When the device code stops working (`expires_in`).
    public var expiresAt: Date
    /// Seconds between polls (`interval`; 5 when the server does not say, §3.2).
    public var interval: Int
    /// The key the tokens will be bound to (DPoP), proven when polling.
    public var proofKey: DPoPKey?

    public init(deviceCode: Secret, userCode: String, verificationURI: URL, verificationURIComplete: URL?, expiresAt: Date, interval: Int) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresAt = expiresAt
        self.interval = interval
    }
}

/// One authorization request of the authorization-code grant (RFC 6749 §4.1) with PKCE
/// (RFC 7636, S256), `state`, the OpenID Connect `nonce`, and what the redirect must carry.
///
/// Everything that proves the response belongs to this request stays in the daemon; only
/// ``url`` goes to the user's browser.
public struct AuthorizationRequest: Sendable {
    /// The URL to open in the browser.
    public var url: URL
    /// Where the provider sends the browser back: our loopback listener (RFC 8252 §7.3).
    public var redirectURI: URL
    /// `state` (RFC 6749 §10.12): the redirect must bring it back unchanged.
    public var state: Secret
    /// `nonce` (OpenID Connect Core §3.1.2.1): the ID token must carry it.
    public var nonce: Secret?
    /// `code_verifier` (RFC 7636 §4.1): sent only with the code, to the token endpoint.
    public var codeVerifier: Secret
    /// The scopes asked for.
    public var scopes: [String]
    /// The issuer the redirect's `iss` must name (RFC 9207 §2.4), when there is one.
    public var issuer: String?
    /// The provider advertises `authorization_response_iss_parameter_supported`: a redirect
    /// without `iss` is refused (RFC 9207 §2.4).
    public var requiresIssuer: Bool
    /// The key the tokens will be bound to (DPoP): its thumbprint went out as `dpop_jkt`
    /// (RFC 9449 §10), its proof goes with the code.
    public var proofKey: DPoPKey?

    public init(
        url: URL,
        redirectURI: URL,
        state: Secret,
        nonce: Secret?,
        codeVerifier: Secret,
        scopes: [String],
        issuer: String?,
        requiresIssuer: Bool
    ) {
        self.url = url
        self.redirectURI = redirectURI
        self.state = state
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.scopes = scopes
        self.issuer = issuer
        self.requiresIssuer = requiresIssuer
    }
}

/// What the daemon should do with a request that reached the loopback redirect listener.
public enum AuthorizationResponseOutcome: Sendable {
    /// Not the response to this sign-in (no `state`, or another one): refuse it and keep
    /// waiting for the real one, so that a stray or forged request cannot end the sign-in.
    case ignored(String)
    /// The response to this sign-in: the sign-in ends with this.
    case finished(Result<SignInResult, AuthGateError>)
}
