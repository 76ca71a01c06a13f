import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AuthGateDaemon

private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// The background refresh of ``SessionManagerTests``' sessions: when the scheduler starts each
/// refresh, how many run at once, in which order, how they spread, and outages.
extension SessionManagerTests {
    @Test("the scheduler refreshes a session ahead of expiry, with no caller", arguments: [0.0, 0.5, 0.999])
    func backgroundRefresh(random: Double) async throws {
        clock.setRandom(random)
        let provider = ScriptedProvider(clock: clock, lifetime: 600)
        let sessions = manager()
        try await signIn(sessions, provider)
        let planned = try #require(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt)
        // 600 s tokens, 60 s lead: the latest point is 80 % of the lifetime, moved earlier by
        // up to 25 % of it.
        let expected = clock.now.addingTimeInterval(600 * (0.8 - 0.25 * random))
        #expect(abs(planned.timeIntervalSince(expected)) < 0.001)

        clock.set(planned.addingTimeInterval(-1))
        #expect(await sessions.refreshDue() == 0)
        clock.set(planned)
        #expect(await sessions.refreshDue() == 1)
        await sessions.waitForRefreshes()
        #expect(try await currentToken(sessions) == "at-1")
        let next = try #require(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt)
        #expect(next > planned)
    }

    @Test("a lead longer than half the lifetime still waits for half of it")
    func shortTokens() {
        let start = Date(timeIntervalSince1970: 0)
        let policy = RefreshPolicy(beforeExpirySeconds: 60, maxBackoffSeconds: 300)
        let late = RefreshSchedule.refreshTime(obtainedAt: start, expiresAt: start.addingTimeInterval(60), policy: policy, random: 0)
        let early = RefreshSchedule.refreshTime(obtainedAt: start, expiresAt: start.addingTimeInterval(60), policy: policy, random: 1)
        #expect(late.timeIntervalSince(start) == 30)
        #expect(early.timeIntervalSince(start) == 15)
        let hour = RefreshSchedule.refreshTime(
            obtainedAt: start,
            expiresAt: start.addingTimeInterval(3600),
            policy: RefreshPolicy(beforeExpirySeconds: 1200),
            random: 0
        )
        #expect(hour.timeIntervalSince(start) == 2400)  // the lead comes before 80 %
    }

    @Test("a session without a refresh token ends when its token does: login_required")
    func noRefreshToken() async throws {
        let sessions = manager()
        let provider = ScriptedProvider(clock: clock)
        let bare = SignInResult(tokens: TokenSet(accessToken: Secret("bare"), expiresAt: clock.now.addingTimeInterval(30)), subject: "s")
        _ = await sessions.store(bare, grant: .password, binding: SessionBinding(client: provider, policy: RefreshPolicy(), storage: .memory), for: key)
        #expect(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt == clock.now.addingTimeInterval(30))
        clock.advance(by: 29)
        await sessions.refreshDue()
        #expect(try await currentToken(sessions) == "bare")
        clock.advance(by: 1)
        await sessions.refreshDue()
        let status = try #require(await sessions.status(uid: 1000, provider: nil).first)
        #expect(status.state == .loginRequired)
        #expect(status.lastError?.contains("no refresh token") == true)
        #expect(await provider.refreshCount == 0)
    }

    @Test("an outage: backoff, the old token until expiry, then expired with last_error, then recovery by itself")
    func outageAndRecovery() async throws {
        let provider = ScriptedProvider(clock: clock, lifetime: 60)
        let sessions = manager()
        let policy = RefreshPolicy(beforeExpirySeconds: 60, maxBackoffSeconds: 8)
        try await signIn(sessions, provider, policy: policy)
        await provider.setOutcome(.failure(AuthGateError(.networkError, "The provider cannot be reached.")))

        var attempts: [Date] = []
        // Step through 80 simulated seconds, one second at a time, as the scheduler would.
        for _ in 0..<80 {
            clock.advance(by: 1)
            if await sessions.refreshDue() > 0 { attempts.append(clock.now) }
            await sessions.waitForRefreshes()
            let status = try #require(await sessions.status(uid: 1000, provider: nil).first)
            if clock.now < status.expiresAt! {
                #expect(try await currentToken(sessions) == "first")
                #expect(status.state == .authenticated)
            } else {
                #expect(status.state == .expired)
                #expect(status.lastError == "The provider cannot be reached.")
            }
        }
        await #expect(throws: AuthGateError(.networkError, "")) { try await currentToken(sessions) }
        // Retries back off: 1, 2, 4, 8 s steps, jittered to half of each as random is 0, capped at 8 s.
        let gaps = zip(attempts.dropFirst(), attempts).map { $0.timeIntervalSince($1) }
        #expect(gaps.count >= 8)
        #expect(gaps.prefix(3) == [1, 1, 2])
        #expect(gaps.suffix(3).allSatisfy { $0 == 4 })

        await provider.setOutcome(nil)
        clock.set(try #require(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt))
        #expect(await sessions.refreshDue() == 1)
        await sessions.waitForRefreshes()
        let recovered = try #require(await sessions.status(uid: 1000, provider: nil).first)
        #expect(recovered.state == .authenticated)
        #expect(recovered.lastError == nil)
        #expect(try await currentToken(sessions).hasPrefix("at-"))
    }

    @Test(
        "Retry-After is honoured: the retry comes between it and twice it, by the random number, but no later than 30 s before the token expires unless Retry-After itself is",
        arguments: [0.0, 0.5, 0.999]
    )
    func retryAfter(random: Double) async throws {
        clock.setRandom(random)
        func plannedRetry(lifetime: TimeInterval, retryAfter: Int) async throws -> TimeInterval {
            let provider = ScriptedProvider(clock: clock, lifetime: lifetime)
            let sessions = manager()
            try await signIn(sessions, provider)
            await provider.setOutcome(.failure(AuthGateError(.serviceUnavailable, "busy", retryAfterSeconds: retryAfter)))
            _ = try? await sessions.token(for: key, minimumValidity: 0, forceRefresh: true)
            return try #require(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt).timeIntervalSince(clock.now)
        }
        // (Seconds from now, to a millisecond: the dates are sums of doubles.)
        #expect(abs(try await plannedRetry(lifetime: 3600, retryAfter: 120) - 120 * (1 + random)) < 0.001)
        // A token of 300 s: the spread stops 30 s before it expires, at 270 s; never before R.
        #expect(abs(try await plannedRetry(lifetime: 300, retryAfter: 200) - min(200 * (1 + random), 270)) < 0.001)
        #expect(abs(try await plannedRetry(lifetime: 300, retryAfter: 400) - 400) < 0.001)
    }

    @Test(
        "one back-off per provider: after a refresh answered with Retry-After, the provider's other due sessions are not sent until it has passed, then spread over one more; another provider's go on"
    )
    func providerBackOff() async throws {
        clock.setRandom(0.5)
        let throttling = ScriptedProvider(clock: clock)
        let other = ScriptedProvider(clock: clock)
        let sessions = manager(limits: RefreshQueue.Limits(total: 1, perProvider: 1))
        let names = ["a", "b", "c", "d"]
        for name in names {
            try await signIn(sessions, throttling, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName(name)!))
        }
        let elsewhere = SessionKey(uid: 1000, provider: ProviderID("other")!, name: .default)
        try await signIn(sessions, other, key: elsewhere)
        await throttling.setOutcome(.failure(AuthGateError(.rateLimited, "429", retryAfterSeconds: 100)))
        clock.advance(by: 600)
        let throttledAt = clock.now
        _ = await sessions.refreshDue()
        await sessions.waitForRefreshes()
        // The first refresh met the 429; each freed slot started the next due session at once,
        // and those were deferred without a request.
        _ = await sessions.refreshDue()
        await sessions.waitForRefreshes()
        #expect(await throttling.refreshCount == 1)
        #expect(await other.refreshCount == 1, "another provider is not held back")
        let plans = await sessions.status(uid: 1000, provider: key.provider).compactMap(\.nextRefreshAt)
        #expect(plans.count == names.count)
        #expect(plans.allSatisfy { $0 >= throttledAt.addingTimeInterval(100) && $0 <= throttledAt.addingTimeInterval(200) }, "\(plans)")

        // Nor does a caller's refresh reach it meanwhile: a forced one learns when to come back,
        // an unforced one is served the token while it is valid.
        let forced = await #expect(throws: AuthGateError.self) {
            try await sessions.token(for: SessionKey(uid: 1000, provider: self.key.provider, name: SessionName("a")!), minimumValidity: 0, forceRefresh: true)
        }
        #expect(forced?.reason == .serviceUnavailable && forced?.retryAfterSeconds == 100, "\(String(describing: forced))")
        #expect(await throttling.refreshCount == 1, "a caller's refresh reached a provider that asked for none")

        // After the pause the provider is asked again.
        await throttling.setOutcome(nil)
        clock.advance(by: 200)
        for _ in names {
            _ = await sessions.refreshDue()
            await sessions.waitForRefreshes()
        }
        #expect(await throttling.refreshCount == 1 + names.count)
    }

    @Test("no more refreshes in flight than the limit, and a freed slot is taken at once without another tick")
    func backgroundLimit() async throws {
        let provider = ScriptedProvider(clock: clock, gated: true)
        let sessions = manager(limits: RefreshQueue.Limits(total: 2, perProvider: 2))
        for name in ["a", "b", "c", "d", "e"] {
            try await signIn(sessions, provider, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName(name)!))
        }
        clock.advance(by: 60)
        #expect(await sessions.refreshDue() == 2)
        #expect(await sessions.refreshDue() == 0)
        #expect(await sessions.refreshStatistics().inFlight == 2)
        // Each refresh that finishes starts the next waiting one by itself: five in all, never
        // more than two at the gate, and nobody calls refreshDue again.
        for _ in 0..<5 {
            await provider.waitForRefresh()
            #expect(await sessions.refreshStatistics().inFlight <= 2)
            await provider.release()
        }
        await sessions.waitForRefreshes()
        #expect(await provider.refreshCount == 5)
        #expect(await sessions.refreshStatistics().started == 5)
        #expect(await sessions.refreshStatistics().inFlight == 0)
    }

    @Test("a slow provider holds at most its own slots: another provider's due sessions still start")
    func perProviderLimit() async throws {
        let slow = ScriptedProvider(clock: clock, gated: true)
        let fast = ScriptedProvider(clock: clock, gated: true)
        let sessions = manager(limits: RefreshQueue.Limits(total: 4, perProvider: 2))
        let other = ProviderID("other")!
        for name in ["a", "b", "c", "d", "e", "f"] {
            try await signIn(sessions, slow, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName(name)!))
        }
        for name in ["a", "b", "c"] {
            try await signIn(sessions, fast, key: SessionKey(uid: 1000, provider: other, name: SessionName(name)!))
        }
        clock.advance(by: 60)
        // Two of each: the slow provider's two slots, and two of the total's four for the other.
        #expect(await sessions.refreshDue() == 4)
        // The other provider's third session takes the slot its first frees, while the slow
        // provider's sessions wait behind its own two.
        for _ in 0..<3 {
            await fast.waitForRefresh()
            await fast.release()
        }
        #expect(await fast.refreshCount == 3)
        #expect(await sessions.refreshStatistics().waiting == ["mock": 4])
        for _ in 0..<6 {
            await slow.waitForRefresh()
            await slow.release()
        }
        await sessions.waitForRefreshes()
        #expect(await slow.refreshCount == 6)
    }

    @Test("sessions waiting for a slot go in the order their tokens expire, not the order they were planned")
    func nearestExpiryFirst() async throws {
        // One provider id, three clients, so that each refresh tells whose it is.
        let blocker = ScriptedProvider(clock: clock, gated: true, lifetime: 60)
        let long = ScriptedProvider(clock: clock, gated: true, lifetime: 590)
        let short = ScriptedProvider(clock: clock, gated: true, lifetime: 60)
        let sessions = manager(limits: RefreshQueue.Limits(total: 1, perProvider: 1))
        let start = clock.now
        try await signIn(sessions, blocker, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName("blocker")!))
        try await signIn(sessions, long, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName("long")!))
        clock.set(start.addingTimeInterval(30))  // the blocker's plan: half of its 60 s
        #expect(await sessions.refreshDue() == 1)
        await blocker.waitForRefresh()  // and holds the only slot
        clock.set(start.addingTimeInterval(450))
        try await signIn(sessions, short, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName("short")!))
        // "long" was planned at 472 s (80 % of 590 s) and expires at 590 s; "short" was planned
        // at 480 s and expires at 510 s.
        clock.set(start.addingTimeInterval(490))
        #expect(await sessions.refreshDue() == 0)
        let overdue = await sessions.status(uid: 1000, provider: nil).compactMap { status in
            status.refreshOverdueSeconds.map { (status.session, $0) }
        }
        #expect(overdue.map(\.0) == ["long", "short"] && overdue.map(\.1) == [18, 10], "\(overdue)")
        await blocker.release()
        await short.waitForRefresh()
        #expect(await long.refreshCount == 0)
        await short.release()
        await long.waitForRefresh()
        await long.release()
        await sessions.waitForRefreshes()
        #expect(await sessions.refreshStatistics().waiting.isEmpty)
        let lateness = await sessions.refreshStatistics()
        #expect(lateness.started == 3 && lateness.latenessMaxSeconds == 18, "\(lateness)")
    }

    /// 2,000 sessions keep this under 5 s in a debug build; scripts/bench runs it with 10,000
    /// (`AUTHGATE_SPREAD_SESSIONS`) for docs/BENCHMARKS.md.
    @Test("mock sessions signed in at once refresh spread out: max per second ≤ 3 × mean")
    func refreshSpread() async throws {
        let sessions = SessionManager(logger: quiet, refreshLimits: RefreshQueue.Limits(total: 100_000, perProvider: 100_000), now: { [clock] in clock.now })
        let provider = MockIdentityProvider(
            settings: MockProviderSettings(
                users: [.init(username: "u", password: Secret("p"))],
                accessTokenLifetimeSeconds: 60
            ),
            now: { [clock] in clock.now }
        )
        let binding = SessionBinding(client: provider, policy: RefreshPolicy(), storage: .memory)
        let count = ProcessInfo.processInfo.environment["AUTHGATE_SPREAD_SESSIONS"].flatMap { Int($0) } ?? 2_000
        for uid in 0..<count {
            let signIn = try await provider.signIn(PasswordCredentials(username: "u", password: Secret("p")))
            _ = await sessions.store(
                signIn,
                grant: .password,
                binding: binding,
                for: SessionKey(uid: UInt32(uid), provider: key.provider, name: .default)
            )
        }
        var perSecond: [Int] = []
        for _ in 0..<300 {
            clock.advance(by: 1)
            perSecond.append(await sessions.refreshDue())
            await sessions.waitForRefreshes()
        }
        let total = perSecond.reduce(0, +)
        let mean = Double(total) / Double(perSecond.count)
        let maximum = Double(perSecond.max() ?? 0)
        print(
            String(
                format: "refresh spread: %d sessions, 60 s tokens, 300 s: %d refreshes, mean %.1f/s, max %.0f/s, max/mean %.2f",
                count,
                total,
                mean,
                maximum,
                maximum / mean
            )
        )
        #expect(total > count * 300 / 60)  // every session refreshed several times
        #expect(maximum <= 3 * mean)
    }

    // MARK: Narrower tokens
}
