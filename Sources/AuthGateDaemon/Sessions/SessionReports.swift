import AuthGateCore
import FoundationEssentials

/// A session as `status` shows it: its state and plans, never a token. ``SessionManager``
/// reports these; the RPC layer turns them into its wire type.
struct SessionSummary: Sendable, Equatable {
    var key: SessionKey
    var state: SessionState
    var expiresAt: Date?
    var nextRefreshAt: Date?
    var lastError: String?
    var subject: String?
    /// The name the user knows, as the provider said it at sign-in.
    var displayName: String? = nil
    /// Seconds the planned refresh has waited for a slot at its provider, from one second on.
    var refreshOverdueSeconds: Int?
    /// The JWK thumbprint of the key the tokens are bound to (DPoP), never the key.
    var dpopThumbprint: String? = nil
    /// A persistent session whose uid's last save failed: why; it lives in memory only.
    var notSaved: String? = nil

    var provider: String { key.provider.rawValue }
    var session: String { key.name.rawValue }
}

/// A sign-in that has just been stored: what the caller is told.
struct SignedInSession: Sendable, Equatable {
    var key: SessionKey
    var state: SessionState
    var expiresAt: Date
    var subject: String?
    /// The name the user knows, when the provider said it.
    var displayName: String?
    /// A persistent session that could not be saved: why; it lives in memory only.
    var notSaved: String? = nil
}

/// An interactive sign-in that has started: what the user must do, and until when.
struct PendingSignIn: Sendable, Equatable {
    var flowID: String
    var grant: Grant
    /// Where the user goes: the verification page, or the authorization URL.
    var verificationURI: String
    var verificationURIComplete: String?
    var userCode: String?
    var authorizationURL: String?
    var expiresAt: Date
}

/// The background refresh as administrators see it (`daemon.info`).
struct RefreshReport: Sendable, Equatable {
    /// Refreshes at providers right now (background and callers').
    var inFlight: Int
    /// Sessions past their planned refresh time waiting for a slot, by provider.
    var waiting: [String: Int]
    /// Background refreshes started since the daemon did.
    var started: Int
    /// How late the last 10,000 background refreshes started against their plan, in seconds.
    var latenessP50Seconds: Double?
    var latenessP99Seconds: Double?
    var latenessMaxSeconds: Double?
}
