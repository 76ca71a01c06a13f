import AuthGateCore
import FoundationEssentials

/// One session's state; never leaves the daemon.
///
/// What most sessions never have (a refresh failure and its message, a platform token file's
/// revision, narrower tokens, unmeetable minimums) is kept apart, in ``Uncommon``, allocated
/// only while one of them is set: a daemon holds many thousands of records (docs/BENCHMARKS.md,
/// "Bytes per session").
struct SessionRecord: Sendable {
    var tokens: TokenSet?
    var subject: String?
    /// The name the user knows (preferred_username, email or name), as the provider said it at
    /// sign-in: what `status` shows, as `login` did.
    var displayName: String? = nil
    /// Changes whenever the session is replaced or removed, so a refresh that finishes late
    /// cannot overwrite a newer sign-in.
    var generation: UInt64
    var binding: SessionBinding
    /// When the current tokens arrived; their lifetime decides the next refresh.
    var obtainedAt: Date
    private var uncommon: UncommonBox?
    /// When the scheduler refreshes (or retries, or expires) the session next.
    var nextRefreshAt: Date?
    // The one-byte fields last, where they fill the optional date's padding.
    /// How the session was obtained: `client_credentials` sessions re-acquire instead of refreshing.
    var grant: Grant
    var state: SessionState
    /// Its user chose at sign-in that programs be asked before they get its tokens (`login
    /// --confirm`): kept with the session, saved with a persistent one, ended with it.
    var asksConsent = false

    init(
        grant: Grant,
        tokens: TokenSet?,
        subject: String?,
        displayName: String? = nil,
        state: SessionState,
        generation: UInt64,
        binding: SessionBinding,
        obtainedAt: Date,
        platformRevision: String? = nil,
        asksConsent: Bool = false
    ) {
        self.grant = grant
        self.tokens = tokens
        self.subject = subject
        self.displayName = displayName
        self.state = state
        self.generation = generation
        self.binding = binding
        self.obtainedAt = obtainedAt
        self.asksConsent = asksConsent
        self.platformRevision = platformRevision
    }

    /// The fields few sessions have, all at their defaults in most.
    struct Uncommon: Sendable, Equatable {
        var lastError: String?
        /// Transient refresh failures in a row, for the backoff.
        var failures = 0
        /// The version of the platform's token file the tokens were obtained with (a
        /// `token_exchange` or `jwt_bearer` session from a file): when the file changes, the
        /// session signs in again with the new token (``SessionManager/replanRotatedPlatformTokens(now:)``).
        var platformRevision: String?
        /// Narrower tokens obtained for `token` calls with `scopes` or `resource`.
        var variants: [TokenVariant: TokenSet] = [:]
        /// The minimum validities callers asked that the provider's token lifetime cannot meet,
        /// each logged once (``MinimumValidity``); at most ``SessionRecord/maximumUnmeetableNotes``.
        var unmeetableMinimums: Set<Int> = []
    }

    /// Never changed in place: a record's copy keeps its own (a new box for every change).
    private final class UncommonBox: Sendable {
        let fields: Uncommon
        init(_ fields: Uncommon) { self.fields = fields }
    }

    private var uncommonFields: Uncommon {
        get { uncommon?.fields ?? Uncommon() }
        set { uncommon = newValue == Uncommon() ? nil : UncommonBox(newValue) }
    }

    var lastError: String? {
        get { uncommon?.fields.lastError }
        set { uncommonFields.lastError = newValue }
    }
    /// Transient refresh failures in a row, for the backoff.
    var failures: Int {
        get { uncommon?.fields.failures ?? 0 }
        set { uncommonFields.failures = newValue }
    }
    /// See ``Uncommon/platformRevision``.
    var platformRevision: String? {
        get { uncommon?.fields.platformRevision }
        set { uncommonFields.platformRevision = newValue }
    }
    /// Narrower tokens obtained for `token` calls with `scopes` or `resource`.
    var variants: [TokenVariant: TokenSet] {
        get { uncommon?.fields.variants ?? [:] }
        set { uncommonFields.variants = newValue }
    }
    /// See ``Uncommon/unmeetableMinimums``.
    var unmeetableMinimums: Set<Int> {
        get { uncommon?.fields.unmeetableMinimums ?? [] }
        set { uncommonFields.unmeetableMinimums = newValue }
    }
    static let maximumUnmeetableNotes = 8
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

    /// The stricter of the two: what a sign-in joined by another caller does, so that a
    /// joiner can make it ask, never stop asking (ask, then keep, then stop asking).
    func stricter(_ other: ConsentChoice) -> ConsentChoice {
        if self == .ask || other == .ask { return .ask }
        if self == .keep || other == .keep { return .keep }
        return .stopAsking
    }
}
