import AuthGateCore
import FoundationEssentials
import HeapModule

/// Which background refresh starts next: a pure value that ``SessionManager`` owns.
///
/// Every session has one planned time (``plan(_:at:)``). Once that time has come the session
/// waits in its provider's line, where the session whose token expires first goes first,
/// until a refresh slot is free: at most ``Limits/total`` refreshes in flight at once, and at
/// most ``Limits/perProvider`` for one provider, so that a slow provider cannot hold every slot
/// (nor every thread of the provider HTTP pool) while the sessions of the others expire. A slot
/// freed by a finished refresh is taken by the next waiting session at once: the bound is on
/// requests in flight, not a rate.
///
/// Entries are never removed from the middle of a heap: a session rescheduled or removed leaves
/// its old entry behind, and the owner tells which entries are still current (`current` in
/// ``next(now:current:)``), which costs O(log n) per stale entry when it surfaces.
struct RefreshQueue {
    struct Limits: Sendable {
        /// Refreshes in flight at once, every provider together.
        var total: Int
        /// Refreshes in flight at once for one provider.
        var perProvider: Int

        /// 16 and 8: the provider HTTP pool has 16 threads, so one provider's refreshes leave at
        /// least half of them to the others.
        static let standard = Limits(total: 16, perProvider: 8)
    }

    /// A session whose planned refresh time has come, and which may start now.
    struct Start: Equatable {
        var key: SessionKey
        /// When it was planned; how late it starts is `now - plannedAt`.
        var plannedAt: Date
    }

    private struct Planned: Comparable {
        var at: Date
        var key: SessionKey
        static func < (lhs: Planned, rhs: Planned) -> Bool { lhs.at < rhs.at }
    }

    /// A session waiting for a slot: the one whose token expires first goes first.
    private struct Waiting: Comparable {
        var expiresAt: Date
        var plannedAt: Date
        var key: SessionKey
        static func < (lhs: Waiting, rhs: Waiting) -> Bool {
            (lhs.expiresAt, lhs.plannedAt) < (rhs.expiresAt, rhs.plannedAt)
        }
    }

    let limits: Limits
    private var planned = Heap<Planned>()
    private var waiting: [ProviderID: Heap<Waiting>] = [:]
    private var inFlightByProvider: [ProviderID: Int] = [:]
    /// Refreshes in flight, background and callers' alike: both hold a provider request.
    private(set) var inFlight = 0

    init(limits: Limits = .standard) {
        self.limits = Limits(total: max(1, limits.total), perProvider: max(1, min(limits.perProvider, limits.total)))
    }

    /// Plans `key`'s next refresh (or retry, or end) at `at`; an earlier plan of the same
    /// session becomes stale (see `current` in ``next(now:current:)``).
    mutating func plan(_ key: SessionKey, at: Date) {
        planned.insert(Planned(at: at, key: key))
    }

    /// The earliest planned time not yet come, stale plans included (waking for one costs a
    /// look); `nil` when nothing is planned.
    var earliestPlan: Date? { planned.min?.at }

    /// The next session to refresh, if one is due and a slot is free for its provider.
    ///
    /// - Parameters:
    ///   - now: The present.
    ///   - current: For a session and the time it was planned at, the expiry of its tokens
    ///     when that plan is still the session's current one; `nil` when the plan is stale.
    mutating func next(now: Date, current: (SessionKey, Date) -> Date?) -> Start? {
        while let due = planned.min, due.at <= now {
            planned.removeMin()
            guard let expiresAt = current(due.key, due.at) else { continue }
            waiting[due.key.provider, default: Heap()].insert(Waiting(expiresAt: expiresAt, plannedAt: due.at, key: due.key))
        }
        while inFlight < limits.total {
            // The provider with a free slot whose first waiting session expires soonest.
            var chosen: (provider: ProviderID, head: Waiting)?
            for (provider, line) in waiting {
                guard let head = line.min, inFlightByProvider[provider, default: 0] < limits.perProvider else { continue }
                if let best = chosen, best.head <= head { continue }
                chosen = (provider, head)
            }
            guard let chosen else { return nil }
            waiting[chosen.provider]?.removeMin()
            if waiting[chosen.provider]?.isEmpty == true { waiting[chosen.provider] = nil }
            guard current(chosen.head.key, chosen.head.plannedAt) != nil else { continue }
            return Start(key: chosen.head.key, plannedAt: chosen.head.plannedAt)
        }
        return nil
    }

    /// A refresh of one of `provider`'s sessions began; it holds a slot until ``finished(_:)``.
    mutating func started(_ provider: ProviderID) {
        inFlight += 1
        inFlightByProvider[provider, default: 0] += 1
    }

    mutating func finished(_ provider: ProviderID) {
        inFlight -= 1
        inFlightByProvider[provider, default: 1] -= 1
        if inFlightByProvider[provider] == 0 { inFlightByProvider[provider] = nil }
    }

    /// The providers with sessions waiting for a slot (stale entries may be counted until they surface).
    var providersWaiting: [ProviderID] { Array(waiting.keys) }
}

/// How late background refreshes started against their plan: the last 10,000, for the
/// percentiles `daemon.info` reports to administrators.
struct RefreshLateness {
    private var samples: [Double] = []
    private var nextSlot = 0
    private static let capacity = 10_000
    /// Background refreshes started since the daemon did.
    private(set) var count = 0

    mutating func record(_ seconds: TimeInterval) {
        count += 1
        let sample = max(0, seconds)
        if samples.count < Self.capacity {
            samples.append(sample)
        } else {
            samples[nextSlot] = sample
            nextSlot = (nextSlot + 1) % Self.capacity
        }
    }

    /// The `fraction` quantile (0…1) of the recorded samples, in seconds; `nil` before the first.
    func quantile(_ fraction: Double) -> TimeInterval? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let index = Int((Double(sorted.count - 1) * min(max(fraction, 0), 1)).rounded(.up))
        return sorted[index]
    }
}
