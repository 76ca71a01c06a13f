import AuthGateCore
import FoundationEssentials

/// The session records. Every change goes through here, so that a session whose tokens
/// change or which goes away is withdrawn in the same step, and its watchers are told (the
/// ``SessionObserver``).
struct SessionTable {
    private var records = Records()
    private var countByUID: [UInt32: Int] = [:]
    let observer: any SessionObserver

    init(observer: any SessionObserver) {
        self.observer = observer
    }

    subscript(key: SessionKey) -> SessionRecord? {
        get { records[key] }
        set {
            let old = records[key]
            if newValue?.tokens != old?.tokens { observer.withdraw(key) }
            // Before anything of the new record is told: its first token must not be published
            // for the cached path when the session asks.
            if (old?.asksConsent ?? false) != (newValue?.asksConsent ?? false) {
                observer.consentChoiceChanged(key, asks: newValue?.asksConsent ?? false)
            }
            records[key] = newValue
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
        guard let removed = records.removeValue(forKey: key) else { return nil }
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
    var all: some Collection<(key: SessionKey, value: SessionRecord)> { records.all }
    var count: Int { records.count }
}

/// The records by key: an open-addressing table (linear probing) of boxes, each box holding
/// its key and its record.
///
/// A `[SessionKey: SessionRecord]` held each record inline in the buckets (a few hundred bytes),
/// and a dictionary keeps up to twice as many buckets as entries (three quarters full at most,
/// a power of two). A box per record cut that to the key (40 bytes) and a reference; here a
/// slot is the reference alone, 8 bytes, and the key lives once, in the box: at 100,000
/// sessions 262,144 slots cost 2 MiB instead of 12 (docs/BENCHMARKS.md, "Bytes per session").
private struct Records {
    /// Never changed in place: a change is a new box, so a copy of the table (an iteration
    /// going on while the table changes) keeps what it saw.
    final class Box: Sendable {
        let key: SessionKey
        let record: SessionRecord
        init(_ key: SessionKey, _ record: SessionRecord) {
            self.key = key
            self.record = record
        }
    }

    /// A power of two long, or empty; at most three quarters used.
    private var slots: [Box?] = []
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    private func home(_ key: SessionKey) -> Int { key.hashValue & mask }

    /// The slot holding `key`.
    private func index(of key: SessionKey) -> Int? {
        guard !slots.isEmpty else { return nil }
        var index = home(key)
        while let box = slots[index] {
            if box.key == key { return index }
            index = (index + 1) & mask
        }
        return nil
    }

    subscript(key: SessionKey) -> SessionRecord? {
        get { index(of: key).flatMap { slots[$0]?.record } }
        set {
            guard let newValue else {
                removeValue(forKey: key)
                return
            }
            if let index = index(of: key) {
                slots[index] = Box(key, newValue)
                return
            }
            if (count + 1) * 4 > slots.count * 3 { grow() }
            var index = home(key)
            while slots[index] != nil { index = (index + 1) & mask }
            slots[index] = Box(key, newValue)
            count += 1
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: SessionKey) -> SessionRecord? {
        guard let found = index(of: key), let removed = slots[found] else { return nil }
        slots[found] = nil
        count -= 1
        // Backward shift: each box after the hole that could sit in it moves up, so that no
        // probe from a box's home to the box crosses an empty slot.
        var hole = found
        var index = (found + 1) & mask
        while let box = slots[index] {
            let wanted = home(box.key)
            // Whether `wanted` lies cyclically in (hole, index]: then the box stays.
            let stays = hole <= index ? (hole < wanted && wanted <= index) : (hole < wanted || wanted <= index)
            if !stays {
                slots[hole] = box
                slots[index] = nil
                hole = index
            }
            index = (index + 1) & mask
        }
        return removed.record
    }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: max(16, old.count * 2))
        for case let box? in old {
            var index = home(box.key)
            while slots[index] != nil { index = (index + 1) & mask }
            slots[index] = box
        }
    }

    var all: some Collection<(key: SessionKey, value: SessionRecord)> {
        slots.lazy.compactMap { $0 }.map { (key: $0.key, value: $0.record) }
    }
}
