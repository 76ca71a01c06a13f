public import AuthGateCore
public import FoundationEssentials

/// A JSON-RPC 2.0 notification from the daemon (no `id`): `{"jsonrpc":"2.0","method":…,"params":…}`.
public struct RPCNotification<Params: Codable & Sendable>: Codable, Sendable {
    public var jsonrpc = "2.0"
    public var method: String
    public var params: Params

    public init(method: String, params: Params) {
        self.method = method
        self.params = params
    }
}

/// `token.changed`: a watched session's token changed (a refresh, a new sign-in). The members
/// of a `token` result, and which session it is.
public struct TokenChanged: Codable, Sendable {
    public static let method = "token.changed"

    public var provider: String
    public var session: String
    public var accessToken: Secret
    public var tokenType: String
    public var expiresAt: Date
    public var scopes: [String]

    public init(provider: String, session: String, accessToken: Secret, tokenType: String, expiresAt: Date, scopes: [String]) {
        self.provider = provider
        self.session = session
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, scopes
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        session = try container.decode(String.self, forKey: .session)
        accessToken = Secret(try container.decode(String.self, forKey: .accessToken))
        tokenType = try container.decode(String.self, forKey: .tokenType)
        expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        scopes = try container.decode([String].self, forKey: .scopes)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encode(session, forKey: .session)
        try container.encode(accessToken.exposedValue, forKey: .accessToken)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(scopes, forKey: .scopes)
    }
}

/// `session.ended`: a watched session ended. The watch goes on: a new sign-in to the same
/// session is a `token.changed`.
public struct SessionEnded: Codable, Sendable {
    public static let method = "session.ended"

    /// How it ended, in the words of the error reasons.
    public enum Reason: String, Codable, Sendable {
        /// Signed out (`logout`), or its provider was removed or changed its issuer or client.
        case loggedOut = "logged_out"
        /// The provider refused it, or its token expired with nothing to refresh it.
        case loginRequired = "login_required"
        /// A reload narrowed the provider's `access` and the watcher's user is no longer
        /// admitted: the session was signed out, and the watch ends (the connection closes).
        case accessRevoked = "access_revoked"
    }

    public var provider: String
    public var session: String
    public var reason: Reason
    public var message: String

    public init(provider: String, session: String, reason: Reason, message: String) {
        self.provider = provider
        self.session = session
        self.reason = reason
        self.message = message
    }
}
