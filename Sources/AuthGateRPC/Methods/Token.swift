public import AuthGateCore
public import FoundationEssentials

// The params and results of `token`, `token.watch`, `token.rejected` and `userinfo`
// (docs/RPC.md), with their wire names.
// Fields holding secrets are `Secret`, so that printing a value never shows a password or a
// token; their `encode(to:)` is the one place a secret is put on the wire.

/// `token` params.
public struct TokenParams: Sendable, Codable {
    public var provider: String
    public var session: String?
    /// The token returned must stay valid at least this long; refreshed first otherwise.
    public var minValidSeconds: Int?
    public var forceRefresh: Bool?
    /// Narrower scopes than the session's (RFC 6749 §6), obtained with its refresh token.
    public var scopes: [String]?
    /// The resource server the token is for (RFC 8707), an absolute URI.
    public var resource: String?
    /// `token.watch` only: when there is no session (`login_required`), wait for a sign-in and
    /// answer then, instead of answering `login_required`.
    public var waitForSignIn: Bool?

    public init(
        provider: String,
        session: String? = nil,
        minValidSeconds: Int? = nil,
        forceRefresh: Bool? = nil,
        scopes: [String]? = nil,
        resource: String? = nil,
        waitForSignIn: Bool? = nil
    ) {
        self.provider = provider
        self.session = session
        self.minValidSeconds = minValidSeconds
        self.forceRefresh = forceRefresh
        self.scopes = scopes
        self.resource = resource
        self.waitForSignIn = waitForSignIn
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, scopes, resource
        case minValidSeconds = "min_valid_seconds"
        case forceRefresh = "force_refresh"
        case waitForSignIn = "wait_for_sign_in"
    }
}

extension TokenParams {
    /// `min_valid_seconds` when the caller does not say.
    public static let defaultMinimumValidity = 10
    /// What `min_valid_seconds` may be: up to a day.
    public static let minimumValidityRange = 0...86_400
}

/// `token` result.
public struct TokenResult: Sendable, Codable {
    public var accessToken: Secret
    public var tokenType: String
    public var expiresAt: Date
    public var scopes: [String]
    public var idToken: Secret?
    /// RFC 8693 `issued_token_type`: only for a token from `token.exchange`.
    public var issuedTokenType: String?

    public init(accessToken: Secret, tokenType: String, expiresAt: Date, scopes: [String], idToken: Secret?, issuedTokenType: String? = nil) {
        self.issuedTokenType = issuedTokenType
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.idToken = idToken
    }

    private enum CodingKeys: String, CodingKey {
        case scopes
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case idToken = "id_token"
        case issuedTokenType = "issued_token_type"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = Secret(try container.decode(String.self, forKey: .accessToken))
        tokenType = try container.decode(String.self, forKey: .tokenType)
        expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        scopes = try container.decode([String].self, forKey: .scopes)
        idToken = try container.decodeIfPresent(String.self, forKey: .idToken).map(Secret.init)
        issuedTokenType = try container.decodeIfPresent(String.self, forKey: .issuedTokenType)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessToken.exposedValue, forKey: .accessToken)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(scopes, forKey: .scopes)
        try container.encodeIfPresent(idToken?.exposedValue, forKey: .idToken)
        try container.encodeIfPresent(issuedTokenType, forKey: .issuedTokenType)
    }
}

extension TokenResult {
    /// What a caller may see of a session's tokens: never the refresh token.
    public init(_ tokens: TokenSet) {
        self.init(
            accessToken: tokens.accessToken,
            tokenType: tokens.tokenType,
            expiresAt: tokens.expiresAt,
            scopes: tokens.scopes,
            idToken: tokens.idToken,
            issuedTokenType: tokens.issuedTokenType
        )
    }
}

/// `token.rejected` params: the caller's API answered 401 to `access_token`.
public struct TokenRejectedParams: Sendable, Codable {
    public var provider: String
    public var session: String?
    public var accessToken: Secret

    public init(provider: String, session: String? = nil, accessToken: Secret) {
        self.provider = provider
        self.session = session
        self.accessToken = accessToken
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session
        case accessToken = "access_token"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        session = try container.decodeIfPresent(String.self, forKey: .session)
        accessToken = Secret(try container.decode(String.self, forKey: .accessToken))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encodeIfPresent(session, forKey: .session)
        try container.encode(accessToken.exposedValue, forKey: .accessToken)
    }
}

/// `userinfo` params.
public struct UserinfoParams: Sendable, Codable {
    public var provider: String
    public var session: String?

    public init(provider: String, session: String? = nil) {
        self.provider = provider
        self.session = session
    }
}
