public import AuthGateCore

// The params and results of `providers.list`, `config.reload` and `provider.discover` (docs/RPC.md), with their wire
// names.

/// One entry of `providers.list`.
public struct ProviderInfo: Sendable, Codable {
    public var id: String
    public var displayName: String
    public var type: String?
    public var status: ProviderStatus
    /// Why the provider is not `ready`, for a person.
    public var statusReason: String?
    public var grants: [Grant]
    /// Whether `register` works with this provider.
    public var registration: Bool
    public var storage: String?
    /// The hosts the git and docker credential helpers serve with this provider, and the user
    /// name they answer with.
    public var credentialHelper: CredentialHelperInfo?

    /// `credential_helper` of a provider.
    public struct CredentialHelperInfo: Sendable, Codable, Equatable {
        public var hosts: [String]
        public var username: String
        /// The helpers that serve the hosts (`git`, `docker`); absent from older daemons: both.
        public var tools: [String]?
        /// `paths`: the path prefixes on the hosts it serves; absent: every path.
        public var paths: [String]?
        /// `authtype`: `bearer`; absent: `basic`.
        public var authtype: String?

        public init(hosts: [String], username: String, tools: [String]? = nil, paths: [String]? = nil, authtype: String? = nil) {
            self.hosts = hosts
            self.username = username
            self.tools = tools
            self.paths = paths
            self.authtype = authtype
        }
    }

    public init(
        id: String,
        displayName: String,
        type: String?,
        status: ProviderStatus,
        statusReason: String?,
        grants: [Grant],
        registration: Bool,
        storage: String?,
        credentialHelper: CredentialHelperInfo? = nil
    ) {
        self.credentialHelper = credentialHelper
        self.id = id
        self.displayName = displayName
        self.type = type
        self.status = status
        self.statusReason = statusReason
        self.grants = grants
        self.registration = registration
        self.storage = storage
    }

    private enum CodingKeys: String, CodingKey {
        case id, type, status, grants, registration, storage
        case displayName = "display_name"
        case statusReason = "status_reason"
        case credentialHelper = "credential_helper"
    }
}

/// How a reload changed one provider.
public enum ProviderChange: String, Sendable, Codable {
    /// A new file: the provider appears.
    case added
    /// The file is gone: the provider and its sessions go.
    case removed
    /// The file (or its client secret) changed: re-validated; its sessions are kept when the
    /// issuer and client are the same.
    case changed
    /// Untouched, sessions and all.
    case unchanged
}

/// One provider in the `config.reload` result.
public struct ProviderReloadReport: Sendable, Codable {
    public var id: String
    public var file: String
    public var change: ProviderChange
    /// Its status after the reload; `nil` for a removed provider.
    public var status: ProviderStatus?
    public var statusReason: String?
    /// The file's problems (`file: $.path: message`), when it is invalid.
    public var problems: [String]
    public var warnings: [String]

    public init(
        id: String,
        file: String,
        change: ProviderChange,
        status: ProviderStatus?,
        statusReason: String?,
        problems: [String],
        warnings: [String]
    ) {
        self.id = id
        self.file = file
        self.change = change
        self.status = status
        self.statusReason = statusReason
        self.problems = problems
        self.warnings = warnings
    }

    private enum CodingKeys: String, CodingKey {
        case id, file, change, status, problems, warnings
        case statusReason = "status_reason"
    }
}

/// The params of `provider.discover`.
public struct ProviderDiscoverParams: Sendable, Codable {
    public var issuer: String
    /// An absolute path to a PEM bundle of CAs to trust instead of the system's.
    public var caFile: String?

    public init(issuer: String, caFile: String? = nil) {
        self.issuer = issuer
        self.caFile = caFile
    }

    private enum CodingKeys: String, CodingKey {
        case issuer
        case caFile = "ca_file"
    }
}

/// The result of `provider.discover`: what an issuer's discovery document says it offers
/// (OpenID Connect Discovery 1.0 §3, RFC 8414 §2, RFC 9126 §5, RFC 9449 §5.1, RFC 7591 §3).
public struct ProviderOffer: Sendable, Codable, Equatable {
    public var issuer: String
    public var tokenEndpoint: String
    public var authorizationEndpoint: String?
    public var deviceAuthorizationEndpoint: String?
    public var pushedAuthorizationRequestEndpoint: String?
    public var requirePushedAuthorizationRequests: Bool
    public var registrationEndpoint: String?
    /// `revocation_endpoint` (RFC 7009), from the discovery document or, when only it names
    /// one, the RFC 8414 metadata.
    public var revocationEndpoint: String?
    /// `grant_types_supported` as sent; `nil` when the document does not say.
    public var grantTypes: [String]?
    /// The grants authgate knows that the document lists (all of them when it does not say).
    public var grants: [Grant]
    public var codeChallengeMethods: [String]
    public var dpopSigningAlgs: [String]
    public var tokenEndpointAuthMethods: [String]
    public var scopes: [String]

    public init(
        issuer: String,
        tokenEndpoint: String,
        authorizationEndpoint: String?,
        deviceAuthorizationEndpoint: String?,
        pushedAuthorizationRequestEndpoint: String?,
        requirePushedAuthorizationRequests: Bool,
        registrationEndpoint: String?,
        grantTypes: [String]?,
        grants: [Grant],
        codeChallengeMethods: [String],
        dpopSigningAlgs: [String],
        tokenEndpointAuthMethods: [String],
        scopes: [String],
        revocationEndpoint: String? = nil
    ) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.pushedAuthorizationRequestEndpoint = pushedAuthorizationRequestEndpoint
        self.requirePushedAuthorizationRequests = requirePushedAuthorizationRequests
        self.registrationEndpoint = registrationEndpoint
        self.grantTypes = grantTypes
        self.grants = grants
        self.codeChallengeMethods = codeChallengeMethods
        self.dpopSigningAlgs = dpopSigningAlgs
        self.tokenEndpointAuthMethods = tokenEndpointAuthMethods
        self.scopes = scopes
        self.revocationEndpoint = revocationEndpoint
    }

    private enum CodingKeys: String, CodingKey {
        case issuer, grants, scopes
        case tokenEndpoint = "token_endpoint"
        case authorizationEndpoint = "authorization_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case pushedAuthorizationRequestEndpoint = "pushed_authorization_request_endpoint"
        case requirePushedAuthorizationRequests = "require_pushed_authorization_requests"
        case registrationEndpoint = "registration_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case grantTypes = "grant_types_supported"
        case codeChallengeMethods = "code_challenge_methods_supported"
        case dpopSigningAlgs = "dpop_signing_alg_values_supported"
        case tokenEndpointAuthMethods = "token_endpoint_auth_methods_supported"
    }
}
