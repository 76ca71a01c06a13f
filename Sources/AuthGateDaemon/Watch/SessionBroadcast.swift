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
    /// Sessions whose user chose consent are never published for the cached path.
    let consent: ConsentKeeper?

    /// - Parameter access: Who may use which provider now, asked by every watch notification;
    ///   `nil` admits every watcher (tests).
    init(
        access: ProviderAccess? = nil,
        notifier: SignInNotifier? = nil,
        consent: ConsentKeeper? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.consent = consent
        published = PublishedTokens(now: now)
        watchers = TokenWatchers(access: access) { [access, consent] key in
            access?.asksConsent(key.provider.rawValue) == true || consent?.sessionAsks(key) == true
        }
        self.notifier = notifier
    }

    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) {
        // A session that asks first is answered by the dispatcher only, which asks.
        if let consent, consent.sessionAsks(key) {
            published.withdraw(key)
            return
        }
        published.publish(tokens, obtainedAt: obtainedAt, unmeetable: unmeetable, for: key)
    }
    func withdraw(_ key: SessionKey) { published.withdraw(key) }
    func consentChoiceChanged(_ key: SessionKey, asks: Bool) {
        consent?.sessionChoiceChanged(key, asks: asks)
        if asks { published.withdraw(key) }
    }
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
        case .signedOut:
            notifier?.sessionRestored(key)
        case .loginRequired: notifier?.sessionNeedsSignIn(key, because: message, offerSignIn: true)
        case .accessRevoked: notifier?.sessionNeedsSignIn(key, because: message, offerSignIn: false)
        }
    }
}
