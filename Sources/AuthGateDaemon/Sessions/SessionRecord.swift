import AuthGateCore
import FoundationEssentials

/// One session's state; never leaves the daemon.
struct SessionRecord: Sendable {
    /// How the session was obtained: `client_credentials` sessions re-acquire instead of refreshing.
    var grant: Grant
    var tokens: TokenSet?
    var subject: String?
    /// The name the user knows (preferred_username, email or name), as the provider said it at
    /// sign-in: what `status` shows, as `login` did.
    var displayName: String? = nil
    var state: SessionState
    var lastError: String?
    /// Changes whenever the session is replaced or removed, so a refresh that finishes late
    /// cannot overwrite a newer sign-in.
    var generation: UInt64
    var binding: SessionBinding
    /// When the current tokens arrived; their lifetime decides the next refresh.
    var obtainedAt: Date
    /// When the scheduler refreshes (or retries, or expires) the session next.
    var nextRefreshAt: Date?
    /// The version of the platform's token file the tokens were obtained with (a
    /// `token_exchange` or `jwt_bearer` session from a file): when the file changes, the session
    /// signs in again with the new token (``SessionManager/replanRotatedPlatformTokens(now:)``).
    var platformRevision: String?
    /// Transient refresh failures in a row, for the backoff.
    var failures = 0
    /// Narrower tokens obtained for `token` calls with `scopes` or `resource`.
    var variants: [TokenVariant: TokenSet] = [:]
    /// The minimum validities callers asked that the provider's token lifetime cannot meet,
    /// each logged once (``MinimumValidity``); at most ``maximumUnmeetableNotes``.
    var unmeetableMinimums: Set<Int> = []
    static let maximumUnmeetableNotes = 8
    /// Its user chose at sign-in that programs be asked before they get its tokens (`login
    /// --confirm`): kept with the session, saved with a persistent one, ended with it.
    var asksConsent = false
}

/// What a sign-in does with the session's consent choice (``SessionRecord/asksConsent``).
enum ConsentChoice: Sendable, Equatable {
    /// As the session it replaces had it (none for a new session).
    case keep
    /// Programs are asked (`login --confirm`).
    case ask
    /// Programs are no longer asked: only a sign-in a person made (`login --no-confirm`).
    case stopAsking

    func applied(to previous: Bool) -> Bool {
        switch self {
        case .keep: previous
        case .ask: true
        case .stopAsking: false
        }
    }
}
