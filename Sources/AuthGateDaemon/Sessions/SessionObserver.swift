import AuthGateCore
import FoundationEssentials

/// Who is told, in the same step as the change, when a session's tokens change or the session
/// ends: in the daemon, the Server's published answers and watches (``SessionBroadcast``).
/// The session layer knows nothing of the wire; this is its only way out.
protocol SessionObserver: Sendable {
    /// `tokens` were just handed out and are the session's current ones, obtained at
    /// `obtainedAt`; `unmeetable` are the minimum validities served by ``MinimumValidity``'s rule.
    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey)
    /// The session's tokens are no longer current (replaced, refused, signed out).
    func withdraw(_ key: SessionKey)
    /// A new access token.
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet)
    /// The session needs a new sign-in, or is gone.
    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String)
    /// The session now asks consent before its tokens are handed out, or no longer does (also
    /// when it is gone): told before its tokens are.
    func consentChoiceChanged(_ key: SessionKey, asks: Bool)
}

/// How a session ended.
enum SessionEnding: Sendable {
    /// Signed out, or its provider was removed or changed its issuer or client.
    case signedOut
    /// The provider refused it, or its token expired with nothing to refresh it.
    case loginRequired
    /// A reload narrowed the provider's `access` and its user is no longer admitted.
    case accessRevoked
}

/// Tells nobody: a session manager on its own, in tests.
struct NoSessionObserver: SessionObserver {
    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) {}
    func withdraw(_ key: SessionKey) {}
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) {}
    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) {}
    func consentChoiceChanged(_ key: SessionKey, asks: Bool) {}
}
