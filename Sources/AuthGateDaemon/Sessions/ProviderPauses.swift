import AuthGateCore
import FoundationEssentials

/// Providers that answered a refresh with a `Retry-After` (throttling, an outage): until when
/// no background refresh is sent to them, and the window the deferred ones are spread over
/// after that. One back-off per provider, not one per session.
///
/// A value the ``SessionManager`` actor owns.
struct ProviderPauses {
    /// The longest pause a `Retry-After` asks for that is kept, in seconds.
    static let longest = 3600

    private var pauses: [ProviderID: (until: Date, window: TimeInterval)] = [:]

    /// `provider` answered with `Retry-After: seconds` at `now`: a longer pause than the one
    /// it has replaces it.
    mutating func pause(_ provider: ProviderID, retryAfterSeconds seconds: Int, at now: Date) {
        let seconds = Double(min(seconds, Self.longest))
        let until = now.addingTimeInterval(seconds)
        if pauses[provider].map({ $0.until < until }) ?? true {
            pauses[provider] = (until, seconds)
        }
    }

    /// The whole seconds left of `provider`'s pause at `now`, if it is paused.
    func remaining(of provider: ProviderID, at now: Date) -> Int? {
        guard let pause = pauses[provider], pause.until > now else { return nil }
        return max(1, Int(pause.until.timeIntervalSince(now).rounded(.up)))
    }

    /// When a background refresh of `provider`'s due now may start instead: `nil` when the
    /// provider is not paused (a pause that has passed ends here), else a time after its
    /// pause, spread over its window by `random` (a number in `0..<1`, asked for only then) —
    /// but no later than `deadline` (shortly before the session's token expires) unless the
    /// pause itself lasts longer: the spread must not let a token run out.
    mutating func deferral(of provider: ProviderID, at now: Date, before deadline: Date, random: () -> Double) -> Date? {
        guard let pause = pauses[provider] else { return nil }
        guard now >= pause.until else { return max(pause.until, min(deadline, pause.until.addingTimeInterval(pause.window * random()))) }
        pauses[provider] = nil
        return nil
    }
}
