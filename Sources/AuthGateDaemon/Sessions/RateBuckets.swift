import AuthGateCore
import FoundationEssentials

/// A uid at one provider: what the limits of one user's calls to a provider are kept by.
struct UserProvider: Hashable, Sendable {
    var uid: UInt32
    var provider: ProviderID
}

/// Token buckets by key (a uid and a provider, say): each holds up to `burst` and refills at
/// `perSecond`; a take from an empty one is refused with the whole seconds until it holds one.
/// Full buckets say nothing and are forgotten once there are many, so that an entry is kept
/// only while it is in use.
///
/// A value its owner (an actor) keeps.
struct RateBuckets<Key: Hashable> {
    let burst: Double
    let perSecond: Double
    private var buckets: [Key: (tokens: Double, updatedAt: Date)] = [:]

    init(burst: Double, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }

    /// Takes one from `key`'s bucket at `now`: `nil` when taken, else the seconds (at least 1)
    /// until one could be.
    mutating func take(_ key: Key, at now: Date) -> Int? {
        var bucket = buckets[key] ?? (burst, now)
        bucket.tokens = min(burst, bucket.tokens + max(0, now.timeIntervalSince(bucket.updatedAt)) * perSecond)
        bucket.updatedAt = now
        guard bucket.tokens >= 1 else {
            buckets[key] = bucket
            return max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up)))
        }
        bucket.tokens -= 1
        buckets[key] = bucket
        if buckets.count > 4096 {
            buckets = buckets.filter { $0.value.tokens + now.timeIntervalSince($0.value.updatedAt) * perSecond < burst }
        }
        return nil
    }
}
