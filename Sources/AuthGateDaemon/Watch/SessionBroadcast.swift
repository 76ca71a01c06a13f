import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// The Server's side of ``SessionObserver``: keeps ``PublishedTokens`` (the answers the event
/// loops serve) and ``TokenWatchers`` (the `token.watch` subscriptions) in step with the
/// sessions, and tells the desktop (``SignInNotifier``, `--notify`) when one needs a sign-in.
struct SessionBroadcast: SessionObserver {
    let published: PublishedTokens
    let watchers: TokenWatchers
    let notifier: SignInNotifier?

    /// - Parameter access: Who may use which provider now, asked by every watch notification;
    ///   `nil` admits every watcher (tests).
    init(access: ProviderAccess? = nil, notifier: SignInNotifier? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        published = PublishedTokens(now: now)
        watchers = TokenWatchers(access: access)
        self.notifier = notifier
    }

    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) {
        published.publish(tokens, obtainedAt: obtainedAt, unmeetable: unmeetable, for: key)
    }
    func withdraw(_ key: SessionKey) { published.withdraw(key) }
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) {
        watchers.tokensChanged(key, tokens)
        notifier?.sessionRestored(key)
    }

    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) {
        let reason: SessionEnded.Reason =
            switch ending {
            case .signedOut: .loggedOut
            case .loginRequired: .loginRequired
            case .accessRevoked: .accessRevoked
            }
        watchers.sessionEnded(key, reason, message: message)
        switch ending {
        case .signedOut: notifier?.sessionRestored(key)
        case .loginRequired: notifier?.sessionNeedsSignIn(key, because: message, offerSignIn: true)
        case .accessRevoked: notifier?.sessionNeedsSignIn(key, because: message, offerSignIn: false)
        }
    }
}
