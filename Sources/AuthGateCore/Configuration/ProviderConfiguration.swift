public import FoundationEssentials

/// Everything one file in `providers.d` says about one identity provider.
///
/// Built only by ``ProviderConfigurationLoader``, which checks every field; see
/// docs/CONFIGURATION.md for the file format.
public struct ProviderConfiguration: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case oidc, oauth2, mock
    }

    /// Where a provider's sessions live.
    public enum Storage: String, Sendable, Hashable, CaseIterable {
        /// Gone when the daemon stops (the default).
        case memory
        /// Sealed at rest in the state directory and restored at start-up.
        case persistent
    }

    public var id: ProviderID
    /// The file it was read from, as the admin named it.
    public var file: String
    public var displayName: String
    public var storage: Storage
    public var refresh: RefreshPolicy
    public var access: AccessRules
    /// Scopes requested at sign-in when the caller names none.
    public var scopes: [String]
    public var settings: Settings
    /// Which hosts the git and docker credential helpers serve with this provider's token.
    public var credentialHelper: CredentialHelper?

    /// `credential_helper`: hosts (`host` or `host:port`, lowercase), the user name the
    /// helpers answer with, which helpers serve them, the path prefixes on them it serves and
    /// how git sends its token.
    public struct CredentialHelper: Sendable, Hashable {
        public var hosts: [String]
        public var username: String
        /// `tools`: the helpers that serve these hosts (``allTools`` by default).
        public var tools: [String]
        /// `paths`: path prefixes on the hosts (`org-a/`, normalised by
        /// ``CredentialHost/pathPrefix(_:)``); empty: every path. See ``CredentialHost/select(host:path:tool:among:)``.
        public var paths: [String]
        /// `authtype`: how git sends the token.
        public var authType: AuthType

        /// The helpers a provider may name in `tools`.
        public static let allTools = ["git", "docker"]

        /// How git's helper answers: `basic`, a user name and the token as the password (every
        /// git), or `bearer`, `Authorization: Bearer TOKEN` when git offers `capability[]=authtype`
        /// (git 2.46 and later; older git gets `basic`).
        public enum AuthType: String, Sendable, Hashable, CaseIterable {
            case basic, bearer
        }

        public init(hosts: [String], username: String = "oauth2", tools: [String] = allTools, paths: [String] = [], authType: AuthType = .basic) {
            self.hosts = hosts
            self.username = username
            self.tools = tools
            self.paths = paths
            self.authType = authType
        }
    }

    public var kind: Kind {
        switch settings {
        case .oidc: .oidc
        case .oauth2: .oauth2
        case .mock: .mock
        }
    }

    /// The grants a caller may use with this provider.
    public var grants: [Grant] {
        switch settings {
        case .oidc(let remote), .oauth2(let remote): remote.grants
        case .mock: [.password]
        }
    }

    /// Whether the provider's only ways to sign in are service grants (client credentials,
    /// JWT bearer, token exchange of a platform token): a service's provider, whose token the
    /// daemon gets on first use with no `authgate login`.
    public var signsInAsClient: Bool {
        !grants.isEmpty && grants.allSatisfy(\.isService)
    }

    /// The service grant a service's sign-in uses: the first one the file lists.
    public var serviceGrant: Grant? { grants.first(where: \.isService) }

    /// The part of the configuration that depends on the provider's type.
    public enum Settings: Sendable, Hashable {
        case oidc(RemoteProviderSettings)
        case oauth2(RemoteProviderSettings)
        case mock(MockProviderSettings)
    }

    public init(
        id: ProviderID,
        file: String,
        displayName: String,
        storage: Storage = .memory,
        refresh: RefreshPolicy = RefreshPolicy(),
        access: AccessRules = AccessRules(),
        scopes: [String] = [],
        settings: Settings,
        credentialHelper: CredentialHelper? = nil
    ) {
        self.credentialHelper = credentialHelper
        self.id = id
        self.file = file
        self.displayName = displayName
        self.storage = storage
        self.refresh = refresh
        self.access = access
        self.scopes = scopes
        self.settings = settings
    }
}

/// An OAuth 2.0 grant type the daemon can perform.
public enum Grant: String, Sendable, Hashable, CaseIterable, Codable {
    case password
    case deviceCode = "device_code"
    case authorizationCode = "authorization_code"
    case clientCredentials = "client_credentials"
    /// RFC 7523 §2.1: a JWT (the platform's, from `assertion_file`, or one the daemon signs
    /// with `assertion_key_file`) as the authorization grant.
    case jwtBearer = "jwt_bearer"
    /// RFC 8693 as a sign-in: the platform's token from `subject_token_file` exchanged for the
    /// provider's.
    case tokenExchange = "token_exchange"

    /// The grant's name on the wire: in `grant_types_supported` (RFC 8414 §2) and a client's
    /// `grant_types` (RFC 7591 §2).
    public var wireName: String {
        switch self {
        case .password: "password"
        case .deviceCode: "urn:ietf:params:oauth:grant-type:device_code"
        case .authorizationCode: "authorization_code"
        case .clientCredentials: "client_credentials"
        case .jwtBearer: "urn:ietf:params:oauth:grant-type:jwt-bearer"
        case .tokenExchange: "urn:ietf:params:oauth:grant-type:token-exchange"
        }
    }

    /// Whether the grant needs a person at a browser or another device (`login.begin`).
    public var isInteractive: Bool { self == .deviceCode || self == .authorizationCode }

    /// Whether the grant signs a service in as itself, with no person and no refresh token:
    /// the session is acquired again before it expires (client credentials, and the workload
    /// identity grants, whose platform token is read again each time).
    public var isService: Bool { self == .clientCredentials || self == .jwtBearer || self == .tokenExchange }
}

/// When sessions are refreshed (`refresh` in the file).
public struct RefreshPolicy: Sendable, Hashable {
    /// Refresh this long before the access token expires (`before_expiry_seconds`).
    public var beforeExpirySeconds: Int
    /// Upper bound of the retry backoff after failures (`max_backoff_seconds`).
    public var maxBackoffSeconds: Int
    /// `first_use_spread_seconds`: the provider's requests in the daemon's first this many
    /// seconds — its start-up check and the sign-ins of services' sessions on first use — are
    /// spread at random over what is left of that window: each waits a random part of it
    /// (0: none wait; each is sent by the window's end). A fleet's daemons started
    /// together (a DaemonSet rolled out, an image booted on many hosts) have not been throttled
    /// yet and have nothing to back off from: this spreads their first requests instead of
    /// sending them in the same second. Each daemon sends two (the check and a sign-in), so
    /// about 2.5 × the daemons ÷ the requests a second the provider allows keeps them under its
    /// limit (docs/BENCHMARKS.md, "A fleet against a provider that throttles").
    public var firstUseSpreadSeconds: Int

    public init(beforeExpirySeconds: Int = 60, maxBackoffSeconds: Int = 300, firstUseSpreadSeconds: Int = 0) {
        self.beforeExpirySeconds = beforeExpirySeconds
        self.maxBackoffSeconds = maxBackoffSeconds
        self.firstUseSpreadSeconds = firstUseSpreadSeconds
    }

    /// How long a request due `sinceStart` after the daemon started waits, for a number in
    /// `0..<1` drawn for it: that part of what is left of the window, nothing after it.
    public func firstUseWait(sinceStart: TimeInterval, random: Double) -> TimeInterval {
        max(0, Double(firstUseSpreadSeconds) - max(0, sinceStart)) * min(max(random, 0), 1)
    }
}

/// Who may use a provider (`access` in the file). Each list that is present must admit the
/// caller; an absent list admits everyone.
public struct AccessRules: Sendable, Hashable {
    public var users: [String]?
    public var groups: [String]?
    /// Absolute paths of executables (the caller's `/proc/PID/exe`).
    public var executables: [String]?
    /// `confirm`: the user is asked before a program gets a token of this provider's sessions
    /// for the first time (docs/SECURITY.md, "Consent").
    public var confirm: Bool

    public init(users: [String]? = nil, groups: [String]? = nil, executables: [String]? = nil, confirm: Bool = false) {
        self.users = users
        self.groups = groups
        self.executables = executables
        self.confirm = confirm
    }

    public var admitsEveryone: Bool { users == nil && groups == nil && executables == nil }
}

/// How the daemon authenticates itself to the token endpoint (RFC 6749 §2.3), and to every
/// other endpoint that authenticates clients (revocation, device authorization, PAR).
public enum ClientAuthentication: String, Sendable, Hashable, CaseIterable {
    case clientSecretBasic = "client_secret_basic"
    case clientSecretPost = "client_secret_post"
    /// An HS256 assertion keyed with the client secret (RFC 7523 §2.2, OIDC Core §9).
    case clientSecretJWT = "client_secret_jwt"
    /// An assertion signed with the client's private key (`client_key_file`).
    case privateKeyJWT = "private_key_jwt"
    /// Mutual TLS with a certificate from a CA the server trusts (RFC 8705 §2.1).
    case tlsClientAuth = "tls_client_auth"
    /// Mutual TLS with a certificate registered with the client (RFC 8705 §2.2).
    case selfSignedTLSClientAuth = "self_signed_tls_client_auth"
    /// The platform's JWT read from `client_assertion_file` for each request, sent as the
    /// client assertion (RFC 7521 §4.2, RFC 7523 §2.2): workload identity federation.
    case clientAssertionFile = "client_assertion_file"
    case none

    /// The methods that need `client_secret_file`.
    public var needsSecret: Bool { [.clientSecretBasic, .clientSecretPost, .clientSecretJWT].contains(self) }

    /// The methods that present a client certificate (RFC 8705).
    public var isMutualTLS: Bool { self == .tlsClientAuth || self == .selfSignedTLSClientAuth }
}

/// `dpop` in a provider file: whether tokens are bound to a key the daemon holds (RFC 9449).
public enum DPoPMode: String, Sendable, Hashable, CaseIterable {
    case off
    /// Every token request carries a proof, and a token that is not DPoP-bound is refused.
    case required
}

/// `par` in a provider file: pushed authorization requests (RFC 9126) for browser sign-ins.
public enum PushedAuthorizationMode: String, Sendable, Hashable, CaseIterable {
    /// Pushed when the provider's metadata names a PAR endpoint.
    case auto
    /// Always pushed; a provider without a PAR endpoint cannot sign in with a browser.
    case required
    case off
}

/// `token_exchange` in a provider file: what `token.exchange` (RFC 8693) may ask the provider for.
public struct TokenExchangePolicy: Sendable, Hashable {
    public static let accessToken = "urn:ietf:params:oauth:token-type:access_token"
    public static let refreshToken = "urn:ietf:params:oauth:token-type:refresh_token"
    public static let jwt = "urn:ietf:params:oauth:token-type:jwt"
    public static let idToken = "urn:ietf:params:oauth:token-type:id_token"
    /// The token types authgated hands to programs. A refresh token never: it would outlive
    /// the session's logout and a narrowed `access`.
    public static let issuableTypes = [accessToken, jwt, idToken]

    /// The audiences a program may ask for; `nil`: any.
    public var audiences: [String]?
    /// The `requested_token_type`s a program may ask for (a subset of ``issuableTypes``).
    public var requestedTokenTypes = TokenExchangePolicy.issuableTypes

    public init(audiences: [String]? = nil, requestedTokenTypes: [String] = TokenExchangePolicy.issuableTypes) {
        self.audiences = audiences
        self.requestedTokenTypes = requestedTokenTypes
    }
}

/// Settings of `oidc` and `oauth2` providers.
public struct RemoteProviderSettings: Sendable, Hashable {
    /// The issuer identifier; required for `oidc`, where discovery starts from it.
    public var issuer: URL?
    public var endpoints: Endpoints
    public var clientID: String
    /// A file holding the client secret; never inline, never argv.
    public var clientSecretFile: String?
    public var clientAuthentication: ClientAuthentication
    public var grants: [Grant]
    /// RFC 8707 / vendor `audience` sent with token requests.
    public var audience: String?
    /// Loopback redirect for the authorization-code grant (RFC 8252 §7.3).
    public var redirectURI: URL?
    /// A PEM bundle of CAs to trust for this provider instead of the system's.
    public var caFile: String?
    /// The client's private key (PEM, EC P-256 or RSA) for `private_key_jwt`.
    public var clientKeyFile: String?
    /// The `kid` of the client's assertions, as registered at the provider.
    public var clientKeyID: String?
    /// The client certificate and its key (PEM) for mutual TLS (RFC 8705).
    public var tlsClientCertificateFile: String?
    public var tlsClientKeyFile: String?
    public var dpop: DPoPMode = .off
    public var pushedAuthorization: PushedAuthorizationMode = .auto
    public var tokenExchange = TokenExchangePolicy()
    public var connectTimeoutMilliseconds: Int
    public var totalTimeoutMilliseconds: Int
    /// Plain http allowed to 127.0.0.1 and ::1 only; for tests.
    public var allowInsecureHTTPLoopback: Bool
    /// The provider's departures from the RFCs its file describes.
    public var quirks = ProviderQuirks()
    /// The platform tokens a service signs in with (workload identity federation).
    public var workload = WorkloadIdentity()

    public struct Endpoints: Sendable, Hashable {
        public var token: URL?
        public var authorization: URL?
        public var deviceAuthorization: URL?
        public var revocation: URL?
        public var userinfo: URL?
        public var jwks: URL?

        public init(
            token: URL? = nil,
            authorization: URL? = nil,
            deviceAuthorization: URL? = nil,
            revocation: URL? = nil,
            userinfo: URL? = nil,
            jwks: URL? = nil
        ) {
            self.token = token
            self.authorization = authorization
            self.deviceAuthorization = deviceAuthorization
            self.revocation = revocation
            self.userinfo = userinfo
            self.jwks = jwks
        }
    }
}

/// Settings of the built-in `mock` provider.
public struct MockProviderSettings: Sendable, Hashable {
    public struct User: Sendable, Hashable {
        public var username: String
        public var password: Secret
        public var email: String?
        public var displayName: String?

        public init(username: String, password: Secret, email: String? = nil, displayName: String? = nil) {
            self.username = username
            self.password = password
            self.email = email
            self.displayName = displayName
        }
    }

    /// Users that exist from the start.
    public var users: [User]
    /// Simulated round-trip time, chosen uniformly in this range for each request.
    public var latencyMilliseconds: ClosedRange<Int>
    public var accessTokenLifetimeSeconds: Int
    public var refreshTokenLifetimeSeconds: Int
    public var allowRegistration: Bool
    public var passwordPolicy: PasswordPolicy

    public init(
        users: [User] = [],
        latencyMilliseconds: ClosedRange<Int> = 0...0,
        accessTokenLifetimeSeconds: Int = 3600,
        refreshTokenLifetimeSeconds: Int = 86_400 * 30,
        allowRegistration: Bool = true,
        passwordPolicy: PasswordPolicy = PasswordPolicy()
    ) {
        self.users = users
        self.latencyMilliseconds = latencyMilliseconds
        self.accessTokenLifetimeSeconds = accessTokenLifetimeSeconds
        self.refreshTokenLifetimeSeconds = refreshTokenLifetimeSeconds
        self.allowRegistration = allowRegistration
        self.passwordPolicy = passwordPolicy
    }
}

extension ProviderConfiguration.Settings {
    /// The settings of an `oidc` or `oauth2` provider; `nil` for the mock.
    public var remote: RemoteProviderSettings? {
        switch self {
        case .oidc(let remote), .oauth2(let remote): remote
        case .mock: nil
        }
    }
}
