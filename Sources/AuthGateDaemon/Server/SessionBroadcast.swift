import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// The Server's side of ``SessionObserver``: keeps ``PublishedTokens`` (the answers the event
/// loops serve) and ``TokenWatchers`` (the `token.watch` subscriptions) in step with the
/// sessions.
struct SessionBroadcast: SessionObserver {
    let published: PublishedTokens
    let watchers: TokenWatchers

    init(now: @escaping @Sendable () -> Date = { Date() }) {
        published = PublishedTokens(now: now)
        watchers = TokenWatchers()
    }

    func publish(_ tokens: TokenSet, for key: SessionKey) { published.publish(tokens, for: key) }
    func withdraw(_ key: SessionKey) { published.withdraw(key) }
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) { watchers.tokensChanged(key, tokens) }

    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) {
        watchers.sessionEnded(key, ending == .signedOut ? .loggedOut : .loginRequired, message: message)
    }
}
