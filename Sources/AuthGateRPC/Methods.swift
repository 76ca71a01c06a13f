public import AuthGateCore
public import FoundationEssentials

// Params and results of each method, with their wire names. Fields holding secrets are
// `Secret`, so that printing a params value never shows a password or a token; their
// `encode(to:)` is the one place a secret is put on the wire.

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

        public init(hosts: [String], username: String) {
            self.hosts = hosts
            self.username = username
        }
    }

    public init(id: String, displayName: String, type: String?, status: ProviderStatus, statusReason: String?,
                grants: [Grant], registration: Bool, storage: String?, credentialHelper: CredentialHelperInfo? = nil) {
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

/// `login` params.
public struct LoginParams: Sendable, Codable {
    public var provider: String
    public var grant: Grant?
    public var username: String?
    public var password: Secret?
    public var session: String?
    public var scopes: [String]?

    public init(provider: String, grant: Grant? = nil, username: String? = nil, password: Secret? = nil,
                session: String? = nil, scopes: [String]? = nil) {
        self.provider = provider
        self.grant = grant
        self.username = username
        self.password = password
        self.session = session
        self.scopes = scopes
    }

    private enum CodingKeys: String, CodingKey { case provider, grant, username, password, session, scopes }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        grant = try container.decodeIfPresent(Grant.self, forKey: .grant)
        username = try container.decodeIfPresent(String.self, forKey: .username)
        password = try container.decodeIfPresent(String.self, forKey: .password).map(Secret.init)
        session = try container.decodeIfPresent(String.self, forKey: .session)
        scopes = try container.decodeIfPresent([String].self, forKey: .scopes)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encodeIfPresent(grant, forKey: .grant)
        try container.encodeIfPresent(username, forKey: .username)
        try container.encodeIfPresent(password?.exposedValue, forKey: .password)
        try container.encodeIfPresent(session, forKey: .session)
        try container.encodeIfPresent(scopes, forKey: .scopes)
    }
}

/// The result of `login`, `register` and `login.complete`.
public struct LoginResult: Sendable, Codable {
    public var provider: String
    public var session: String
    public var state: SessionState
    public var expiresAt: Date
    /// The user's identifier at the provider, where it says.
    public var subject: String?
    /// The name the user knows (`preferred_username`, else `email`, else `name`), where the
    /// provider says one; the CLI shows it instead of an opaque subject.
    public var displayName: String?

    public init(provider: String, session: String, state: SessionState, expiresAt: Date, subject: String?, displayName: String? = nil) {
        self.provider = provider
        self.session = session
        self.state = state
        self.expiresAt = expiresAt
        self.subject = subject
        self.displayName = displayName
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, state, subject
        case expiresAt = "expires_at"
        case displayName = "display_name"
    }
}

/// `register` params.
public struct RegisterParams: Sendable, Codable {
    public var provider: String
    public var username: String?
    public var email: String?
    public var password: Secret?
    public var passwordConfirmation: Secret?
    public var session: String?

    public init(provider: String, username: String?, email: String?, password: Secret?, passwordConfirmation: Secret?, session: String? = nil) {
        self.provider = provider
        self.username = username
        self.email = email
        self.password = password
        self.passwordConfirmation = passwordConfirmation
        self.session = session
    }

    private enum CodingKeys: String, CodingKey {
        case provider, username, email, password, session
        case passwordConfirmation = "password_confirmation"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        username = try container.decodeIfPresent(String.self, forKey: .username)
        email = try container.decodeIfPresent(String.self, forKey: .email)
        password = try container.decodeIfPresent(String.self, forKey: .password).map(Secret.init)
        passwordConfirmation = try container.decodeIfPresent(String.self, forKey: .passwordConfirmation).map(Secret.init)
        session = try container.decodeIfPresent(String.self, forKey: .session)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encodeIfPresent(username, forKey: .username)
        try container.encodeIfPresent(email, forKey: .email)
        try container.encodeIfPresent(password?.exposedValue, forKey: .password)
        try container.encodeIfPresent(passwordConfirmation?.exposedValue, forKey: .passwordConfirmation)
        try container.encodeIfPresent(session, forKey: .session)
    }
}

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

    public init(provider: String, session: String? = nil, minValidSeconds: Int? = nil, forceRefresh: Bool? = nil,
                scopes: [String]? = nil, resource: String? = nil) {
        self.provider = provider
        self.session = session
        self.minValidSeconds = minValidSeconds
        self.forceRefresh = forceRefresh
        self.scopes = scopes
        self.resource = resource
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, scopes, resource
        case minValidSeconds = "min_valid_seconds"
        case forceRefresh = "force_refresh"
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

    public init(accessToken: Secret, tokenType: String, expiresAt: Date, scopes: [String], idToken: Secret?) {
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
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = Secret(try container.decode(String.self, forKey: .accessToken))
        tokenType = try container.decode(String.self, forKey: .tokenType)
        expiresAt = try container.decode(Date.self, forKey: .expiresAt)
        scopes = try container.decode([String].self, forKey: .scopes)
        idToken = try container.decodeIfPresent(String.self, forKey: .idToken).map(Secret.init)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessToken.exposedValue, forKey: .accessToken)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(scopes, forKey: .scopes)
        try container.encodeIfPresent(idToken?.exposedValue, forKey: .idToken)
    }
}

/// `status` params: all of the caller's sessions, or those of one provider.
public struct StatusParams: Sendable, Codable {
    public var provider: String?
    /// Every user's sessions, each with its `uid` (admins only).
    public var all: Bool?

    public init(provider: String? = nil, all: Bool? = nil) {
        self.provider = provider
        self.all = all
    }
}

/// One entry of `status`: never a token value.
public struct SessionStatus: Sendable, Codable {
    public var provider: String
    public var session: String
    public var state: SessionState
    public var expiresAt: Date?
    /// When the daemon will refresh it next, where it has planned to.
    public var nextRefreshAt: Date?
    public var lastError: String?
    public var subject: String?
    /// Whose session it is; only in an admin's `status` with `all`.
    public var uid: UInt32?
    /// How long its planned refresh has waited for a slot, when a second or more: its provider
    /// answers more slowly than its sessions need (the daemon also logs a warning).
    public var refreshOverdueSeconds: Int?

    public init(provider: String, session: String, state: SessionState, expiresAt: Date?, nextRefreshAt: Date?,
                lastError: String?, subject: String?, uid: UInt32? = nil, refreshOverdueSeconds: Int? = nil) {
        self.uid = uid
        self.refreshOverdueSeconds = refreshOverdueSeconds
        self.provider = provider
        self.session = session
        self.state = state
        self.expiresAt = expiresAt
        self.nextRefreshAt = nextRefreshAt
        self.lastError = lastError
        self.subject = subject
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, state, subject, uid
        case expiresAt = "expires_at"
        case nextRefreshAt = "next_refresh_at"
        case lastError = "last_error"
        case refreshOverdueSeconds = "refresh_overdue_seconds"
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

/// `logout` params.
public struct LogoutParams: Sendable, Codable {
    public var provider: String
    public var session: String?

    public init(provider: String, session: String? = nil) {
        self.provider = provider
        self.session = session
    }
}

/// `logout` result: `removed` says whether there was a session to remove.
public struct LogoutResult: Sendable, Codable {
    public var removed: Bool

    public init(removed: Bool) {
        self.removed = removed
    }
}

/// `metrics` result: the daemon's metrics in Prometheus's text exposition format.
public struct MetricsResult: Sendable, Codable {
    /// `text/plain; version=0.0.4; charset=utf-8`.
    public var contentType: String
    public var text: String

    public init(contentType: String, text: String) {
        self.contentType = contentType
        self.text = text
    }

    private enum CodingKeys: String, CodingKey {
        case contentType = "content_type"
        case text
    }
}

/// `daemon.info` result.
public struct DaemonInfo: Sendable, Codable {
    public var version: String
    public var uptimeSeconds: Int
    /// Providers the caller can see.
    public var providers: Int
    /// The caller's sessions.
    public var sessions: Int
    public var configDir: String
    /// `system` or `user`.
    public var mode: String
    public var socket: String
    /// `token` calls answered on an event loop from a session's published answer since the
    /// daemon started, for every caller; shown to administrators only.
    public var cachedTokenAnswers: Int?
    /// The background refresh, every user's; shown to administrators only.
    public var refresh: RefreshStatistics?

    public init(version: String, uptimeSeconds: Int, providers: Int, sessions: Int, configDir: String, mode: String, socket: String,
                cachedTokenAnswers: Int? = nil, refresh: RefreshStatistics? = nil) {
        self.cachedTokenAnswers = cachedTokenAnswers
        self.refresh = refresh
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.providers = providers
        self.sessions = sessions
        self.configDir = configDir
        self.mode = mode
        self.socket = socket
    }

    private enum CodingKeys: String, CodingKey {
        case version, providers, sessions, mode, socket
        case uptimeSeconds = "uptime_seconds"
        case configDir = "config_dir"
        case cachedTokenAnswers = "cached_token_answers"
        case refresh
    }
}

/// The background refresh as `daemon.info` shows it to administrators.
public struct RefreshStatistics: Sendable, Codable, Equatable {
    /// Refreshes at providers right now (background and callers').
    public var inFlight: Int
    /// Sessions past their planned refresh time waiting for a slot, by provider.
    public var waiting: [String: Int]
    /// Background refreshes started since the daemon did.
    public var started: Int
    /// How late the last 10,000 background refreshes started against their plan, in seconds.
    public var latenessP50Seconds: Double?
    public var latenessP99Seconds: Double?
    public var latenessMaxSeconds: Double?

    public init(inFlight: Int, waiting: [String: Int], started: Int, latenessP50Seconds: Double?, latenessP99Seconds: Double?,
                latenessMaxSeconds: Double?) {
        self.inFlight = inFlight
        self.waiting = waiting
        self.started = started
        self.latenessP50Seconds = latenessP50Seconds
        self.latenessP99Seconds = latenessP99Seconds
        self.latenessMaxSeconds = latenessMaxSeconds
    }

    private enum CodingKeys: String, CodingKey {
        case waiting, started
        case inFlight = "in_flight"
        case latenessP50Seconds = "lateness_p50_seconds"
        case latenessP99Seconds = "lateness_p99_seconds"
        case latenessMaxSeconds = "lateness_max_seconds"
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

    public init(id: String, file: String, change: ProviderChange, status: ProviderStatus?, statusReason: String?,
                problems: [String], warnings: [String]) {
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

/// `login.begin` params: starts (or joins) an interactive sign-in.
public struct LoginBeginParams: Sendable, Codable {
    public var provider: String
    /// `device_code` (RFC 8628) or `authorization_code` (a browser, with PKCE).
    public var grant: Grant
    public var session: String?
    public var scopes: [String]?
    /// OpenID Connect `prompt` for the browser flow: `create` (registration), `login`,
    /// `consent` or `select_account`.
    public var prompt: String?

    public init(provider: String, grant: Grant, session: String? = nil, scopes: [String]? = nil, prompt: String? = nil) {
        self.provider = provider
        self.grant = grant
        self.session = session
        self.scopes = scopes
        self.prompt = prompt
    }
}

/// `login.begin` result: what to show the user. A second `login.begin` for the same
/// provider and session while one is pending answers with the pending one (same `flow_id`).
public struct LoginBeginResult: Sendable, Codable, Equatable {
    public var flowID: String
    /// The grant of the pending flow (which may differ from the one asked for when joining).
    public var grant: Grant
    /// The page to open: the device verification page, or the authorization URL.
    public var verificationURI: String
    /// The device verification page with the code filled in, where the provider gives one.
    public var verificationURIComplete: String?
    /// The code to type on the verification page (device flow).
    public var userCode: String?
    /// The URL to open in a browser (authorization-code flow); the same as `verification_uri`.
    public var authorizationURL: String?
    /// When the flow ends with `flow_expired` unless the user has finished.
    public var expiresAt: Date

    public init(flowID: String, grant: Grant, verificationURI: String, verificationURIComplete: String?, userCode: String?,
                authorizationURL: String?, expiresAt: Date) {
        self.flowID = flowID
        self.grant = grant
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.userCode = userCode
        self.authorizationURL = authorizationURL
        self.expiresAt = expiresAt
    }

    private enum CodingKeys: String, CodingKey {
        case grant
        case flowID = "flow_id"
        case verificationURI = "verification_uri"
        case verificationURIComplete = "verification_uri_complete"
        case userCode = "user_code"
        case authorizationURL = "authorization_url"
        case expiresAt = "expires_at"
    }
}

/// `login.complete` params: waits for the flow's end (at most `timeout_seconds`).
public struct LoginCompleteParams: Sendable, Codable {
    public var flowID: String
    /// How long to wait (1–3600 s); by default until the flow ends.
    public var timeoutSeconds: Int?

    public init(flowID: String, timeoutSeconds: Int? = nil) {
        self.flowID = flowID
        self.timeoutSeconds = timeoutSeconds
    }

    private enum CodingKeys: String, CodingKey {
        case flowID = "flow_id"
        case timeoutSeconds = "timeout_seconds"
    }
}

/// `login.cancel` params: ends a pending flow (the CLI sends it on Ctrl-C).
public struct LoginCancelParams: Sendable, Codable {
    public var flowID: String

    public init(flowID: String) {
        self.flowID = flowID
    }

    private enum CodingKeys: String, CodingKey {
        case flowID = "flow_id"
    }
}

/// `login.cancel` result: `cancelled` is false when the flow had already ended.
public struct LoginCancelResult: Sendable, Codable {
    public var cancelled: Bool

    public init(cancelled: Bool) {
        self.cancelled = cancelled
    }
}
