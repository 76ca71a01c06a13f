import AuthGateCore
import FoundationEssentials

/// When the session manager looks for providers slower than their sessions need, and when it
/// says so again: it looks at most once a second (a look reads every session), and says it of
/// one provider once per ``interval``.
///
/// A value the ``SessionManager`` actor owns; what a backlog is and the warning are the
/// manager's (``SessionManager/warnAboutBacklogs(now:)``).
struct BacklogWarnings {
    /// How long a provider's backlog is warned about once.
    static let interval: TimeInterval = 60

    private var lookedAt: Date?
    private var warnedAt: [ProviderID: Date] = [:]

    /// Whether to look `now`: a second after the last look, or at the first.
    mutating func looks(at now: Date) -> Bool {
        guard lookedAt.map({ now.timeIntervalSince($0) >= 1 }) ?? true else { return false }
        lookedAt = now
        return true
    }

    /// Whether to warn about `provider`'s backlog `now`: not within ``interval`` of the last.
    mutating func warns(about provider: ProviderID, at now: Date) -> Bool {
        if let warned = warnedAt[provider], now.timeIntervalSince(warned) < Self.interval { return false }
        warnedAt[provider] = now
        return true
    }
}
