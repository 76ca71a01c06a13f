import AuthGateCore
import FoundationEssentials

/// Slows password guessing through the daemon: after `maximumFailures` wrong passwords from
/// one uid within `window`, that uid's password sign-ins are refused with `rate_limited`
/// (and `retry_after_seconds`) until the oldest of those failures is older than `window`.
/// A successful sign-in clears the uid's record. Per uid, so one user cannot lock out another.
actor LoginThrottle {
    private let maximumFailures: Int
    private let window: TimeInterval
    private let now: @Sendable () -> Date
    /// Recent failures per uid, oldest first; never more than `maximumFailures` each.
    private var failures: [UInt32: [Date]] = [:]

    init(maximumFailures: Int = 5, window: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maximumFailures = maximumFailures
        self.window = window
        self.now = now
    }

    /// - Throws: `rate_limited` while the uid is held back.
    func check(uid: UInt32) throws(AuthGateError) {
        let now = now()
        guard var recent = failures[uid] else { return }
        recent.removeAll { now.timeIntervalSince($0) >= window }
        failures[uid] = recent.isEmpty ? nil : recent
        guard recent.count >= maximumFailures, let oldest = recent.first else { return }
        let wait = Int((window - now.timeIntervalSince(oldest)).rounded(.up))
        throw AuthGateError(.rateLimited, "Too many wrong passwords; try again in \(wait) s.", retryAfterSeconds: max(1, wait))
    }

    func recordFailure(uid: UInt32) {
        var recent = failures[uid] ?? []
        recent.append(now())
        failures[uid] = Array(recent.suffix(maximumFailures))
    }

    func recordSuccess(uid: UInt32) {
        failures[uid] = nil
    }
}
