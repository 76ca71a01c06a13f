public import FoundationEssentials

/// When sessions are refreshed, and when failed refreshes are tried again: pure functions of
/// the token's lifetime, the provider's ``RefreshPolicy`` and a random number, so that the
/// scheduler's choices can be tested exactly.
public enum RefreshSchedule {
    /// The share of a token's lifetime by which refreshes are moved earlier at random, so that
    /// sessions signed in together drift apart instead of refreshing in the same second.
    public static let jitterFraction = 0.25

    /// When to refresh tokens obtained at `obtainedAt`.
    ///
    /// The latest point is 80 % of the lifetime or `before_expiry_seconds` before expiry,
    /// whichever comes first, but never before half the lifetime (a 60 s token with the default
    /// 60 s lead is not refreshed the moment it arrives). From there the time is moved earlier
    /// by `random` × 25 % of the lifetime.
    /// - Parameter random: A number in `0..<1`.
    public static func refreshTime(obtainedAt: Date, expiresAt: Date, policy: RefreshPolicy, random: Double) -> Date {
        let lifetime = expiresAt.timeIntervalSince(obtainedAt)
        guard lifetime > 0 else { return expiresAt }
        let byLead = 1 - Double(policy.beforeExpirySeconds) / lifetime
        let latest = min(0.8, max(0.5, byLead))
        let fraction = latest - jitterFraction * min(max(random, 0), 1)
        // At least a second after the tokens arrived, unless they expire sooner than that.
        let earliest = min(obtainedAt.addingTimeInterval(1), expiresAt)
        return max(earliest, obtainedAt.addingTimeInterval(lifetime * fraction))
    }

    /// How long to wait before trying again after `failures` transient failures in a row.
    ///
    /// How long before its token expires a throttled session's refresh is tried at the latest:
    /// the spread over a provider's `Retry-After` stops there.
    public static let expiryMargin: TimeInterval = 30

    /// Capped exponential backoff (1 s, 2 s, 4 s … up to `max_backoff_seconds`) with jitter
    /// (half to all of the step), and never sooner than the provider's `Retry-After` (R), which is
    /// honoured up to an hour so that a wrong header cannot strand a session for days: between
    /// R and 2R, by `random` — but no later than ``expiryMargin`` before the token expires
    /// (`expiresIn` from now) unless R itself is: the spread must not let a token run out.
    /// - Parameter random: A number in `0..<1`.
    public static func retryDelay(failures: Int, policy: RefreshPolicy, retryAfterSeconds: Int?, expiresIn: TimeInterval? = nil, random: Double) -> TimeInterval
    {
        let cap = Double(max(1, policy.maxBackoffSeconds))
        let step = min(cap, Double(1 << (min(max(failures, 1), 32) - 1)))
        let jittered = step * (0.5 + 0.5 * min(max(random, 0), 1))
        guard let retryAfterSeconds, retryAfterSeconds > 0 else { return jittered }
        // Spread over one more Retry-After: sessions throttled together do not all come back
        // in the second the provider named.
        let retryAfter = Double(min(retryAfterSeconds, 3600))
        let spread = max(jittered, retryAfter * (1 + min(max(random, 0), 1)))
        guard let expiresIn else { return spread }
        return max(retryAfter, min(spread, expiresIn - expiryMargin))
    }
}
