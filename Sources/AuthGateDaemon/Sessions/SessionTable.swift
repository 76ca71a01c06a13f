import AuthGateCore
import FoundationEssentials

/// The session records. Every change goes through here, so that a session whose tokens
/// change or which goes away is withdrawn in the same step, and its watchers are told (the
/// ``SessionObserver``).
struct SessionTable {
    /// Each record in a box of its own: the dictionary's buckets then hold a reference instead
    /// of the whole record (a few hundred bytes inline: tokens, binding, DPoP key), and a
    /// dictionary keeps up to twice as many buckets as records: a third less memory with
    /// 100,000 sessions (`authgate-bench --only memory`, docs/BENCHMARKS.md).
    private final class Box: Sendable {
        let record: SessionRecord
        init(_ record: SessionRecord) { self.record = record }
    }

    private var records: [SessionKey: Box] = [:]
    private var countByUID: [UInt32: Int] = [:]
    let observer: any SessionObserver

    init(observer: any SessionObserver) {
        self.observer = observer
    }

    subscript(key: SessionKey) -> SessionRecord? {
        get { records[key]?.record }
        set {
            let old = records[key]?.record
            if newValue?.tokens != old?.tokens { observer.withdraw(key) }
            // Before anything of the new record is told: its first token must not be published
            // for the cached path when the session asks.
            if (old?.asksConsent ?? false) != (newValue?.asksConsent ?? false) {
                observer.consentChoiceChanged(key, asks: newValue?.asksConsent ?? false)
            }
            records[key] = newValue.map(Box.init)
            if (old != nil) != (newValue != nil) { count(key.uid, newValue != nil ? 1 : -1) }
            tell(key, old: old, new: newValue)
        }
    }

    /// Removes a session; its watchers are told how it ended (signed out unless said otherwise).
    @discardableResult
    mutating func removeValue(
        forKey key: SessionKey,
        ending: SessionEnding = .signedOut,
        message: String = "The session was signed out."
    ) -> SessionRecord? {
        observer.withdraw(key)
        guard let removed = records.removeValue(forKey: key)?.record else { return nil }
        count(key.uid, -1)
        if removed.asksConsent { observer.consentChoiceChanged(key, asks: false) }
        observer.sessionEnded(key, ending, message: message)
        return removed
    }

    /// A new access token is `token.changed`; tokens gone (refused, expired) or the record gone
    /// (signed out) is `session.ended`. A change of the refresh token alone tells nobody.
    private func tell(_ key: SessionKey, old: SessionRecord?, new: SessionRecord?) {
        switch (old?.tokens, new?.tokens) {
        case (let before, .some(let after)) where before?.accessToken != after.accessToken || before?.expiresAt != after.expiresAt:
            observer.tokensChanged(key, after)
        case (.some, nil) where new != nil:
            observer.sessionEnded(key, .loginRequired, message: new?.lastError ?? "The session needs a new sign-in.")
        case (_, _) where old != nil && new == nil:
            observer.sessionEnded(key, .signedOut, message: "The session was signed out.")
        default:
            break
        }
    }

    /// The sessions of `uid`, in O(1).
    func count(uid: UInt32) -> Int { countByUID[uid, default: 0] }

    private mutating func count(_ uid: UInt32, _ change: Int) {
        let count = countByUID[uid, default: 0] + change
        countByUID[uid] = count > 0 ? count : nil
    }

    /// Every record, without copying them.
    var all: some Collection<(key: SessionKey, value: SessionRecord)> {
        records.lazy.map { (key: $0.key, value: $0.value.record) }
    }
    var count: Int { records.count }
}
