/// Why a request failed, as a stable string that clients may match on.
///
/// The raw values are the wire names of the `data.reason` field of an RPC error (see the
/// error table in docs/RPC.md). They never change meaning; new reasons may be added.
public enum ErrorReason: String, Sendable, Codable, CaseIterable {
    /// The line was not valid JSON (JSON-RPC "parse error").
    case parseError = "parse_error"
    /// The JSON was not a valid JSON-RPC 2.0 request.
    case invalidRequest = "invalid_request"
    /// The method does not exist.
    case methodNotFound = "method_not_found"
    /// The params have the wrong shape or type.
    case invalidParams = "invalid_params"
    /// A request line exceeded the size limit; the connection is closed after this error.
    case requestTooLarge = "request_too_large"
    /// One or more fields were refused before anything was sent (`fields` says which).
    case validationFailed = "validation_failed"
    case unknownProvider = "unknown_provider"
    /// The provider exists but cannot be used now (invalid configuration, unreachable, or a
    /// type this build cannot sign in to).
    case providerUnavailable = "provider_unavailable"
    case unsupportedGrant = "unsupported_grant"
    case invalidCredentials = "invalid_credentials"
    case userExists = "user_exists"
    case weakPassword = "weak_password"
    /// There is no usable session: sign in (again).
    case loginRequired = "login_required"
    /// The provider could not be reached (offline, DNS, connection refused).
    case networkError = "network_error"
    /// The provider answered 5xx / 503 or timed out.
    case serviceUnavailable = "service_unavailable"
    /// The provider answered something that makes no sense.
    case serverError = "server_error"
    case permissionDenied = "permission_denied"
    case flowExpired = "flow_expired"
    /// `login.complete` reached its `timeout_seconds` while the user has not finished: call
    /// it again to keep waiting.
    case loginPending = "login_pending"
    /// The interactive sign-in was cancelled (`login.cancel`, or the daemon stopping).
    case loginCancelled = "login_cancelled"
    case rateLimited = "rate_limited"
    /// The provider refused the DPoP proof of the session's key (RFC 9449), asked for a new
    /// nonce twice in a row, or answered with a token that is not DPoP-bound.
    case dpopRejected = "dpop_rejected"
    /// The session store or its key cannot be used for what was asked: the keyring or the
    /// key file fails, or the key is a systemd credential, which the daemon cannot change.
    case storageUnavailable = "storage_unavailable"
    /// The provider refused a dynamic client registration (RFC 7591 §3.2.2: its `error` and
    /// `error_description` in the message; or a missing or refused initial access token), or
    /// the deletion of a registered client (RFC 7592 §2.3).
    case registrationRefused = "registration_refused"
    /// The platform's token a service signs in with (`client_assertion_file`, `assertion_file`,
    /// `subject_token_file`) is missing, unreadable, not a JWT, expired or not yet valid.
    case workloadTokenInvalid = "workload_token_invalid"
    /// The session asks the user before a program gets its token (`access.confirm`, `login
    /// --confirm`), and the user denied this program, did not answer in time, or could not be
    /// asked.
    case consentDenied = "consent_denied"
    case internalError = "internal_error"
}

/// One refused input field, for `validation_failed` and `weak_password`.
public struct FieldError: Sendable, Hashable, Codable {
    /// The field's wire name, e.g. `password_confirmation`.
    public var field: String
    /// What is wrong with it, as a sentence fragment for a person.
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
}

/// The one error type the domain and the daemon throw towards a client.
///
/// It carries a stable ``ErrorReason`` and a sentence for a person. The message must never
/// contain a secret (token, password, client secret). Equality compares the reason only.
public struct AuthGateError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: ErrorReason
    /// A sentence for a person; no secrets.
    public var message: String
    /// Refused fields, for `validation_failed` and `weak_password`.
    public var fields: [FieldError]
    /// When to try again, for `rate_limited` and `service_unavailable`.
    public var retryAfterSeconds: Int?

    public init(_ reason: ErrorReason, _ message: String, fields: [FieldError] = [], retryAfterSeconds: Int? = nil) {
        self.reason = reason
        self.message = message
        self.fields = fields
        self.retryAfterSeconds = retryAfterSeconds
    }

    public static func == (lhs: AuthGateError, rhs: AuthGateError) -> Bool {
        lhs.reason == rhs.reason
    }

    public var description: String { "\(message) (\(reason.rawValue))" }

    /// `validation_failed` listing each refused field.
    public static func validationFailed(_ fields: [FieldError]) -> AuthGateError {
        let list = fields.map { "\($0.field) \($0.message)" }.joined(separator: "; ")
        return AuthGateError(.validationFailed, "Some fields were refused: \(list).", fields: fields)
    }

    public static func loginRequired(provider: String) -> AuthGateError {
        AuthGateError(.loginRequired, "You are not signed in to \(provider); run `authgate login \(provider)`.")
    }

    public static func unknownProvider(_ provider: String) -> AuthGateError {
        AuthGateError(.unknownProvider, "There is no provider named '\(provider)'; `authgate providers` lists them.")
    }
}
