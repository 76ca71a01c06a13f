import AuthGateCore
import FoundationEssentials

/// One session's state; never leaves the daemon.
struct SessionRecord: Sendable {
    /// How the session was obtained: `client_credentials` sessions re-acquire instead of refreshing.
    var grant: Grant
    var tokens: TokenSet?
    var subject: String?
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
}
