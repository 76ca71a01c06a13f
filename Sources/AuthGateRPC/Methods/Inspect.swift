public import AuthGateCore
public import FoundationEssentials

// The params and result of `session.inspect` (docs/RPC.md), with their wire names: what a
// provider gave one of the caller's sessions, for `authgate provider test`. Never a token, a
// secret or a claim's value: names, algorithms, lifetimes and outcomes only.

/// `session.inspect` params.
public struct SessionInspectParams: Sendable, Codable {
    public var provider: String
    public var session: String?
    /// Refresh the session first (forced) and report how it went.
    public var refresh: Bool?
    /// Ask the provider's userinfo endpoint and report which claims it answered.
    public var userinfo: Bool?

    public init(provider: String, session: String? = nil, refresh: Bool? = nil, userinfo: Bool? = nil) {
        self.provider = provider
        self.session = session
        self.refresh = refresh
        self.userinfo = userinfo
    }
}

/// `session.inspect` result.
public struct SessionInspection: Sendable, Codable {
    public var provider: String
    public var session: String
    /// How the session was obtained.
    public var grant: Grant
    /// `Bearer`, or `DPoP` for tokens bound to the session's key.
    public var tokenType: String
    /// When the access token expires; `nil` when it never does (a provider that sends no
    /// `expires_in`, with the file's `expires_in_default` "never").
    public var expiresAt: Date?
    /// The access token's lifetime as issued; `nil` when it never expires.
    public var accessTokenLifetimeSeconds: Int?
    /// The scopes asked for (the provider file's `scopes`).
    public var scopesRequested: [String]
    /// The scopes the provider granted (its `scope`, or the ones asked when it names none).
    public var scopesGranted: [String]
    /// Whether an ID token was due: an OpenID Connect provider, `openid` asked, a user's sign-in.
    public var idTokenExpected: Bool
    /// The ID token the sign-in brought, verified by the daemon; `nil` when the session holds none.
    public var idToken: IDTokenFacts?
    /// Whether the session holds a refresh token (as it was before any `refresh`).
    public var refreshToken: Bool
    /// The forced refresh, when asked.
    public var refresh: RefreshFacts?
    /// The userinfo request, when asked.
    public var userinfo: UserinfoFacts?
    /// Whether the provider file asks for DPoP (`"dpop": "required"`) and whether the tokens are bound.
    public var dpop: DPoPFacts

    public init(
        provider: String,
        session: String,
        grant: Grant,
        tokenType: String,
        expiresAt: Date?,
        accessTokenLifetimeSeconds: Int?,
        scopesRequested: [String],
        scopesGranted: [String],
        idTokenExpected: Bool,
        idToken: IDTokenFacts?,
        refreshToken: Bool,
        refresh: RefreshFacts?,
        userinfo: UserinfoFacts?,
        dpop: DPoPFacts
    ) {
        self.provider = provider
        self.session = session
        self.grant = grant
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.accessTokenLifetimeSeconds = accessTokenLifetimeSeconds
        self.scopesRequested = scopesRequested
        self.scopesGranted = scopesGranted
        self.idTokenExpected = idTokenExpected
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.refresh = refresh
        self.userinfo = userinfo
        self.dpop = dpop
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, grant, refresh, userinfo, dpop
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case accessTokenLifetimeSeconds = "access_token_lifetime_seconds"
        case scopesRequested = "scopes_requested"
        case scopesGranted = "scopes_granted"
        case idTokenExpected = "id_token_expected"
        case idToken = "id_token"
        case refreshToken = "refresh_token"
    }

    /// `expires_at` is written as `null` when the token never expires, not left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encode(session, forKey: .session)
        try container.encode(grant, forKey: .grant)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(accessTokenLifetimeSeconds, forKey: .accessTokenLifetimeSeconds)
        try container.encode(scopesRequested, forKey: .scopesRequested)
        try container.encode(scopesGranted, forKey: .scopesGranted)
        try container.encode(idTokenExpected, forKey: .idTokenExpected)
        try container.encode(idToken, forKey: .idToken)
        try container.encode(refreshToken, forKey: .refreshToken)
        try container.encodeIfPresent(refresh, forKey: .refresh)
        try container.encodeIfPresent(userinfo, forKey: .userinfo)
        try container.encode(dpop, forKey: .dpop)
    }
}

/// What the daemon read of a verified ID token: its header's `alg` and `kid`, the `iss` and
/// `aud` it checked, and the names of the claims it holds (never their values).
public struct IDTokenFacts: Sendable, Codable, Equatable {
    public var alg: String
    public var kid: String?
    public var iss: String
    public var aud: [String]
    public var claims: [String]

    public init(alg: String, kid: String?, iss: String, aud: [String], claims: [String]) {
        self.alg = alg
        self.kid = kid
        self.iss = iss
        self.aud = aud
        self.claims = claims
    }
}

/// Why something the daemon tried failed: the error's reason and sentence.
public struct InspectionProblem: Sendable, Codable, Equatable {
    public var reason: ErrorReason
    public var message: String

    public init(reason: ErrorReason, message: String) {
        self.reason = reason
        self.message = message
    }
}

/// The forced refresh of `session.inspect`.
public struct RefreshFacts: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        /// New tokens came (for `client_credentials`: obtained again).
        case refreshed
        /// The session has no refresh token to refresh with.
        case notPossible = "not_possible"
        case failed
    }

    public var status: Status
    /// Whether the provider issued a new refresh token (rotation, RFC 9700 §4.14.2); `nil`
    /// unless refreshed with a refresh token.
    public var rotated: Bool?
    public var error: InspectionProblem?

    public init(status: Status, rotated: Bool? = nil, error: InspectionProblem? = nil) {
        self.status = status
        self.rotated = rotated
        self.error = error
    }
}

/// The userinfo request of `session.inspect` (OpenID Connect Core §5.3).
public struct UserinfoFacts: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        case answered
        /// The provider has no userinfo endpoint.
        case notOffered = "not_offered"
        case failed
    }

    public var status: Status
    /// The names of the claims it answered.
    public var claims: [String]?
    public var error: InspectionProblem?

    public init(status: Status, claims: [String]? = nil, error: InspectionProblem? = nil) {
        self.status = status
        self.claims = claims
        self.error = error
    }
}

/// DPoP (RFC 9449) as the file asks and as the tokens are.
public struct DPoPFacts: Sendable, Codable, Equatable {
    /// The provider file says `"dpop": "required"`.
    public var required: Bool
    /// The tokens are bound to the session's key (`token_type` `DPoP`).
    public var bound: Bool
    /// The key's JWK SHA-256 thumbprint (RFC 7638).
    public var jkt: String?

    public init(required: Bool, bound: Bool, jkt: String?) {
        self.required = required
        self.bound = bound
        self.jkt = jkt
    }
}

/// How the revocation at sign-out went (`logout`'s `revocation`).
public struct RevocationReport: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        /// The provider answered 200 (RFC 7009 §2.2).
        case revoked
        /// The provider has no revocation endpoint: the tokens expire on their own.
        case notOffered = "not_offered"
        /// The provider answered with another status.
        case refused
        /// The request failed.
        case failed
        /// The provider does not say.
        case unknown
    }

    public var status: Status
    /// What went wrong, for `refused` and `failed`.
    public var message: String?

    public init(status: Status, message: String? = nil) {
        self.status = status
        self.message = message
    }
}

extension RevocationReport {
    public init(_ outcome: RevocationOutcome) {
        switch outcome {
        case .revoked: self.init(status: .revoked)
        case .notOffered: self.init(status: .notOffered)
        case .refused(let status): self.init(status: .refused, message: "The provider answered HTTP \(status).")
        case .failed(let reason): self.init(status: .failed, message: "The revocation request failed [\(reason.rawValue)].")
        case .unknown: self.init(status: .unknown)
        }
    }
}
