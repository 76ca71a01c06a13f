import AuthGateCore
import FoundationEssentials

/// The sessions signed in with a platform token file (RFC 8693 / RFC 7523 with a workload's
/// token, which the platform rotates: kubelet does before the token expires), and when their
/// files are looked at next: on the refresh scheduler's wake-ups, at most every ``interval``.
///
/// A value the ``SessionManager`` actor owns; what a rotation does to a session is the
/// manager's (``SessionManager/replanRotatedPlatformTokens(now:)``).
struct PlatformTokenChecks {
    /// How often the files are looked at for a rotation.
    static let interval: TimeInterval = 5

    private var sessions: Set<SessionKey> = []
    private var checkedAt: Date?

    /// Looks at `key`'s platform token file from now on.
    mutating func watch(_ key: SessionKey) { sessions.insert(key) }

    /// Stops looking at `key`'s file (the session is gone, or signs in without one).
    mutating func forget(_ key: SessionKey) { sessions.remove(key) }

    /// How long the scheduler may sleep: `untilPlan` (`nil`: until woken), or at most
    /// ``interval`` while some session has a file to look at.
    func sleep(untilPlan: TimeInterval?) -> TimeInterval? {
        guard !sessions.isEmpty else { return untilPlan }
        return min(untilPlan ?? Self.interval, Self.interval)
    }

    /// The sessions whose files are to be looked at `now`: every one, once ``interval`` has
    /// passed since the last look, else none.
    mutating func due(at now: Date) -> Set<SessionKey> {
        guard !sessions.isEmpty else { return [] }
        if let checkedAt, now.timeIntervalSince(checkedAt) < Self.interval { return [] }
        checkedAt = now
        return sessions
    }
}
