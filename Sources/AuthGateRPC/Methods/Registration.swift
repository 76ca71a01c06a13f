public import AuthGateCore

// The params and results of `provider.register` and `provider.deregister` (docs/RPC.md): RFC 7591
// dynamic client registration and the RFC 7592 §2.3 delete, run by the daemon for
// `authgate provider add --register` and `provider remove`.

/// The params of `provider.register`.
public struct ProviderRegisterParams: Sendable, Codable {
    /// The issuer whose discovery document names the `registration_endpoint`; or:
    public var issuer: String?
    /// The registration endpoint itself (https).
    public var registrationEndpoint: String?
    /// An absolute path to a PEM bundle of CAs to trust instead of the system's.
    public var caFile: String?
    /// The grants the client will use; `refresh_token` is added for those that sign users in.
    public var grants: [Grant]
    public var redirectURIs: [String]
    /// `none` (a public client, the default), `private_key_jwt` (the daemon generates an ES256
    /// key and registers its public JWK), or another method the provider lists.
    public var tokenEndpointAuthMethod: String?
    public var clientName: String?
    /// Scopes, space-separated (`scope` of RFC 7591 §2).
    public var scope: String?
    /// An initial access token, when the provider demands one (RFC 7591 §3).
    public var initialAccessToken: String?

    public init(
        issuer: String? = nil,
        registrationEndpoint: String? = nil,
        caFile: String? = nil,
        grants: [Grant],
        redirectURIs: [String],
        tokenEndpointAuthMethod: String? = nil,
        clientName: String? = nil,
        scope: String? = nil,
        initialAccessToken: String? = nil
    ) {
        self.issuer = issuer
        self.registrationEndpoint = registrationEndpoint
        self.caFile = caFile
        self.grants = grants
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.clientName = clientName
        self.scope = scope
        self.initialAccessToken = initialAccessToken
    }

    private enum CodingKeys: String, CodingKey {
        case issuer, grants, scope
        case registrationEndpoint = "registration_endpoint"
        case caFile = "ca_file"
        case redirectURIs = "redirect_uris"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
        case clientName = "client_name"
        case initialAccessToken = "initial_access_token"
    }
}

/// The result of `provider.register`: the client the provider registered (RFC 7591 §3.2.1),
/// with its secrets, for the CLI to keep in 0600 files.
public struct ProviderRegistration: Sendable, Codable, Equatable {
    public var clientID: String
    public var clientSecret: String?
    /// Seconds since 1970; 0 for never.
    public var clientSecretExpiresAt: Int?
    /// RFC 7592: where the client is managed, and the token that may.
    public var registrationClientURI: String?
    public var registrationAccessToken: String?
    /// The endpoint the client was registered at.
    public var registrationEndpoint: String
    /// What the provider granted, as it answered (it may differ from what was asked).
    public var grantTypes: [String]?
    public var redirectURIs: [String]?
    public var tokenEndpointAuthMethod: String?
    public var scope: String?
    /// With `private_key_jwt`: the generated private key (PKCS#8 PEM) and its `kid`.
    public var clientKeyPEM: String?
    public var clientKeyID: String?

    public init(
        clientID: String,
        clientSecret: String?,
        clientSecretExpiresAt: Int?,
        registrationClientURI: String?,
        registrationAccessToken: String?,
        registrationEndpoint: String,
        grantTypes: [String]?,
        redirectURIs: [String]?,
        tokenEndpointAuthMethod: String?,
        scope: String?,
        clientKeyPEM: String? = nil,
        clientKeyID: String? = nil
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientSecretExpiresAt = clientSecretExpiresAt
        self.registrationClientURI = registrationClientURI
        self.registrationAccessToken = registrationAccessToken
        self.registrationEndpoint = registrationEndpoint
        self.grantTypes = grantTypes
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.scope = scope
        self.clientKeyPEM = clientKeyPEM
        self.clientKeyID = clientKeyID
    }

    private enum CodingKeys: String, CodingKey {
        case scope
        case clientKeyPEM = "client_key_pem"
        case clientKeyID = "client_key_id"
        case clientID = "client_id"
        case clientSecret = "client_secret"
        case clientSecretExpiresAt = "client_secret_expires_at"
        case registrationClientURI = "registration_client_uri"
        case registrationAccessToken = "registration_access_token"
        case registrationEndpoint = "registration_endpoint"
        case grantTypes = "grant_types"
        case redirectURIs = "redirect_uris"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
    }
}

/// The params of `provider.deregister`.
public struct ProviderDeregisterParams: Sendable, Codable {
    public var registrationClientURI: String
    public var registrationAccessToken: String
    public var caFile: String?

    public init(registrationClientURI: String, registrationAccessToken: String, caFile: String? = nil) {
        self.registrationClientURI = registrationClientURI
        self.registrationAccessToken = registrationAccessToken
        self.caFile = caFile
    }

    private enum CodingKeys: String, CodingKey {
        case registrationClientURI = "registration_client_uri"
        case registrationAccessToken = "registration_access_token"
        case caFile = "ca_file"
    }
}

/// The result of `provider.deregister`.
public struct ProviderDeregistration: Sendable, Codable, Equatable {
    /// Always true: a refusal is an error.
    public var deleted: Bool

    public init(deleted: Bool) {
        self.deleted = deleted
    }
}
