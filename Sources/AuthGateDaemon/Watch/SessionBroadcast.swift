import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// The Server's side of ``SessionObserver``: keeps ``PublishedTokens`` (the answers the event
/// loops serve) and ``TokenWatchers`` (the `token.watch` subscriptions) in step with the
/// sessions.
struct SessionBroadcast: SessionObserver {
    let published: PublishedTokens
    let watchers: TokenWatchers

    /// - Parameter access: Who may use which provider now, asked by every watch notification;
    ///   `nil` admits every watcher (tests).
    init(access: ProviderAccess? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        published = PublishedTokens(now: now)
        watchers = TokenWatchers(access: access)
    }

    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) {
        published.publish(tokens, obtainedAt: obtainedAt, unmeetable: unmeetable, for: key)
    }
    func withdraw(_ key: SessionKey) { published.withdraw(key) }
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) { watchers.tokensChanged(key, tokens) }

    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) {
        let reason: SessionEnded.Reason =
            switch ending {
            case .signedOut: .loggedOut
            case .loginRequired: .loginRequired
            case .accessRevoked: .accessRevoked
            }
        watchers.sessionEnded(key, reason, message: message)
    }
}
