import AuthGateCore
import FoundationEssentials

/// Slows password guessing through the daemon: after `maximumFailures` wrong passwords from
/// one uid within `window`, that uid's password sign-ins are refused with `rate_limited`
/// (and `retry_after_seconds`) until the oldest of those failures is older than `window`.
/// For bounded uids, attempts in flight count as failures until they end, so that guesses sent
/// in parallel cannot all pass the check before the first is answered (root and the daemon's
/// own user, who may sign in many sessions at once from a script, are throttled by their
/// failures only). A successful sign-in clears the uid's record. Per uid, so one user cannot
/// lock out another.
actor LoginThrottle {
    /// How an attempt ended.
    enum Outcome {
        case success
        case wrongPassword
        /// Anything else (the provider down, a malformed request): not a guess.
        case other
    }

    private let maximumFailures: Int
    private let window: TimeInterval
    private let now: @Sendable () -> Date
    /// Recent failures per uid, oldest first; never more than `maximumFailures` each.
    private var failures: [UInt32: [Date]] = [:]
    private var inFlight: [UInt32: Int] = [:]

    init(maximumFailures: Int = 5, window: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maximumFailures = maximumFailures
        self.window = window
        self.now = now
    }

    /// Admits one password attempt of `uid`, to be ended with ``end(uid:_:)``.
    /// - Parameter countInFlight: Whether the uid's attempts in flight count against it.
    /// - Throws: `rate_limited` while the uid is held back.
    func begin(uid: UInt32, countInFlight: Bool) throws(AuthGateError) {
        let now = now()
        var recent = failures[uid] ?? []
        recent.removeAll { now.timeIntervalSince($0) >= window }
        failures[uid] = recent.isEmpty ? nil : recent
        let pending = countInFlight ? inFlight[uid, default: 0] : 0
        if recent.count + pending >= maximumFailures {
            let wait =
                recent.count >= maximumFailures
                ? recent.first.map { Int((window - now.timeIntervalSince($0)).rounded(.up)) } ?? 1
                : 1  // attempts in flight: their answers decide
            throw AuthGateError(
                .rateLimited,
                "Too many wrong passwords or attempts at once; try again in \(max(1, wait)) s.",
                retryAfterSeconds: max(1, wait)
            )
        }
        inFlight[uid, default: 0] += 1
    }

    func end(uid: UInt32, _ outcome: Outcome) {
        let pending = inFlight[uid, default: 1] - 1
        inFlight[uid] = pending > 0 ? pending : nil
        switch outcome {
        case .success:
            failures[uid] = nil
        case .wrongPassword:
            var recent = failures[uid] ?? []
            recent.append(now())
            failures[uid] = Array(recent.suffix(maximumFailures))
        case .other:
            break
        }
    }
}
