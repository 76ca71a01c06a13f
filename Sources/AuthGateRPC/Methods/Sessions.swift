public import AuthGateCore
public import FoundationEssentials

// The params and results of `status` and `logout` (docs/RPC.md), with their wire names.

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
    /// The provider's identifier of the user (`sub`), not a local uid.
    public var subject: String?
    /// The name the user knows (preferred_username, email or name), as the provider said it at
    /// sign-in; `login` said the same.
    public var displayName: String?
    /// Whose session it is; only in an admin's `status` with `all`.
    public var uid: UInt32?
    /// How long its planned refresh has waited for a slot, when a second or more: its provider
    /// answers more slowly than its sessions need (the daemon also logs a warning).
    public var refreshOverdueSeconds: Int?
    /// The JWK SHA-256 thumbprint (RFC 7638) of the key its tokens are bound to (DPoP): the
    /// `cnf.jkt` of its access tokens. The key itself never leaves the daemon.
    public var dpopJKT: String?
    /// A persistent session that could not be saved to disk (its uid's last save failed): why.
    /// It lives in memory only until a save succeeds; absent when saved (or not persistent).
    public var notSaved: String?

    public init(
        provider: String,
        session: String,
        state: SessionState,
        expiresAt: Date?,
        nextRefreshAt: Date?,
        lastError: String?,
        subject: String?,
        displayName: String? = nil,
        uid: UInt32? = nil,
        refreshOverdueSeconds: Int? = nil,
        dpopJKT: String? = nil,
        notSaved: String? = nil
    ) {
        self.notSaved = notSaved
        self.uid = uid
        self.dpopJKT = dpopJKT
        self.refreshOverdueSeconds = refreshOverdueSeconds
        self.provider = provider
        self.session = session
        self.state = state
        self.expiresAt = expiresAt
        self.nextRefreshAt = nextRefreshAt
        self.lastError = lastError
        self.subject = subject
        self.displayName = displayName
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, state, subject, uid
        case displayName = "display_name"
        case expiresAt = "expires_at"
        case nextRefreshAt = "next_refresh_at"
        case lastError = "last_error"
        case refreshOverdueSeconds = "refresh_overdue_seconds"
        case dpopJKT = "dpop_jkt"
        case notSaved = "not_saved"
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

/// `logout` result: `removed` says whether there was a session to remove, `revocation` how
/// its revocation at the provider went (absent when there was nothing to revoke).
public struct LogoutResult: Sendable, Codable {
    public var removed: Bool
    public var revocation: RevocationReport?

    public init(removed: Bool, revocation: RevocationReport? = nil) {
        self.removed = removed
        self.revocation = revocation
    }
}
