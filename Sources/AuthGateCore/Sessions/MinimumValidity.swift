public import FoundationEssentials

/// How long a served token must stay valid, when the caller asks more than the provider grants.
///
/// A caller's `min_valid_seconds` at or above the lifetime the provider gives its tokens (a
/// helper asking 60 s of a provider issuing 60 s tokens) can never be met: every token is
/// already too short when it arrives, and refreshing on every call would cost the provider a
/// request per call. Such a caller is served a token younger than ``unmeetableShare`` of its
/// lifetime instead (it still has at least the other half to live), so the provider sees at
/// most two refreshes per token lifetime however often it asks.
public enum MinimumValidity {
    /// The share of a token's lifetime during which it is served to a caller asking at least
    /// that whole lifetime.
    public static let unmeetableShare = 0.5

    /// Whether `asked` seconds cannot be met by tokens that live `lifetime` seconds from issue.
    public static func isUnmeetable(asked: TimeInterval, lifetime: TimeInterval) -> Bool {
        lifetime > 0 && asked >= lifetime
    }

    /// The validity actually required of tokens that live `lifetime` seconds: `asked`, or half
    /// the lifetime when `asked` cannot be met.
    public static func effective(asked: TimeInterval, lifetime: TimeInterval) -> TimeInterval {
        isUnmeetable(asked: asked, lifetime: lifetime) ? lifetime * (1 - unmeetableShare) : asked
    }
}

extension TokenSet {
    /// Whether these tokens, obtained at `obtainedAt`, serve a caller asking `minimumValidity`
    /// seconds at `now` (see ``MinimumValidity``).
    public func serves(minimumValidity: TimeInterval, obtainedAt: Date, at now: Date) -> Bool {
        isValid(for: MinimumValidity.effective(asked: minimumValidity, lifetime: expiresAt.timeIntervalSince(obtainedAt)), at: now)
    }
}
