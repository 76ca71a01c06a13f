public import AuthGateCore
public import FoundationEssentials

// The params and results of `login` and `register`, and the interactive sign-ins `login.begin`,
// `login.complete`, `login.cancel` (docs/RPC.md), with their wire names.
// Fields holding secrets are `Secret`, so that printing a value never shows a password or a
// token; their `encode(to:)` is the one place a secret is put on the wire.

/// `login` params.
public struct LoginParams: Sendable, Codable {
    public var provider: String
    public var grant: Grant?
    public var username: String?
    public var password: Secret?
    public var session: String?
    public var scopes: [String]?
    /// `true`: the user is asked before a program gets this session's tokens for the first time
    /// (consent); `false` ends that choice; absent leaves it as it is.
    public var confirm: Bool?

    public init(
        provider: String,
        grant: Grant? = nil,
        username: String? = nil,
        password: Secret? = nil,
        session: String? = nil,
        scopes: [String]? = nil,
        confirm: Bool? = nil
    ) {
        self.confirm = confirm
        self.provider = provider
        self.grant = grant
        self.username = username
        self.password = password
        self.session = session
        self.scopes = scopes
    }

    private enum CodingKeys: String, CodingKey { case provider, grant, username, password, session, scopes, confirm }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        grant = try container.decodeIfPresent(Grant.self, forKey: .grant)
        username = try container.decodeIfPresent(String.self, forKey: .username)
        password = try container.decodeIfPresent(String.self, forKey: .password).map(Secret.init)
        session = try container.decodeIfPresent(String.self, forKey: .session)
        scopes = try container.decodeIfPresent([String].self, forKey: .scopes)
        confirm = try container.decodeIfPresent(Bool.self, forKey: .confirm)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encodeIfPresent(grant, forKey: .grant)
        try container.encodeIfPresent(username, forKey: .username)
        try container.encodeIfPresent(password?.exposedValue, forKey: .password)
        try container.encodeIfPresent(session, forKey: .session)
        try container.encodeIfPresent(scopes, forKey: .scopes)
        try container.encodeIfPresent(confirm, forKey: .confirm)
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
    /// What the person should know about the sign-in, one sentence: a persistent session that
    /// could not be saved to disk lives in memory only. Absent when there is nothing to say.
    public var notice: String?

    public init(
        provider: String,
        session: String,
        state: SessionState,
        expiresAt: Date,
        subject: String?,
        displayName: String? = nil,
        notice: String? = nil
    ) {
        self.provider = provider
        self.session = session
        self.state = state
        self.expiresAt = expiresAt
        self.subject = subject
        self.displayName = displayName
        self.notice = notice
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, state, subject, notice
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
    /// As `login`'s `confirm`.
    public var confirm: Bool?

    public init(provider: String, grant: Grant, session: String? = nil, scopes: [String]? = nil, prompt: String? = nil, confirm: Bool? = nil) {
        self.confirm = confirm
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

    public init(
        flowID: String,
        grant: Grant,
        verificationURI: String,
        verificationURIComplete: String?,
        userCode: String?,
        authorizationURL: String?,
        expiresAt: Date
    ) {
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
