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

/// A provider whose refreshes are counted and, when `gated`, held until the test releases them.
private actor ScriptedProvider: IdentityProvider {
    private(set) var refreshCount = 0
    private(set) var clientSignIns = 0
    private(set) var variantsAsked: [TokenVariant] = []
    private(set) var refreshTokensSpent: [String] = []
    private var gates: [CheckedContinuation<Void, Never>] = []
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var outcome: Result<TokenSet, AuthGateError>?
    let clock: ManualClock
    let gated: Bool
    let lifetime: TimeInterval

    init(clock: ManualClock, gated: Bool = false, lifetime: TimeInterval = 60) {
        self.clock = clock
        self.gated = gated
        self.lifetime = lifetime
    }

    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult {
        SignInResult(
            tokens: TokenSet(accessToken: Secret("first"), expiresAt: clock.now.addingTimeInterval(lifetime), refreshToken: Secret("rt-0")),
            subject: "s"
        )
    }

    func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult {
        throw AuthGateError(.unsupportedGrant, "no")
    }

    func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        refreshCount += 1
        variantsAsked.append(variant)
        refreshTokensSpent.append(refreshToken.exposedValue)
        if gated {
            await withCheckedContinuation {
                gates.append($0)
                for waiter in waiting { waiter.resume() }
                waiting.removeAll()
            }
        }
        if let outcome { return try outcome.get() }
        return TokenSet(
            accessToken: Secret("at-\(refreshCount)"),
            expiresAt: clock.now.addingTimeInterval(lifetime),
            refreshToken: Secret("rt-\(refreshCount)"),
            scopes: variant.scopes
        )
    }

    func revoke(_ tokens: TokenSet) async {}

    func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult {
        clientSignIns += 1
        return SignInResult(
            tokens: TokenSet(accessToken: Secret("client-\(clientSignIns)"), expiresAt: clock.now.addingTimeInterval(lifetime)),
            subject: "client:x"
        )
    }

    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] { [:] }

    /// Returns once a refresh is waiting at the gate.
    func waitForRefresh() async {
        if !gates.isEmpty { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Lets the longest-waiting refresh go on.
    func release() {
        if !gates.isEmpty { gates.removeFirst().resume() }
    }

    /// `nil` refreshes successfully with new tokens.
    func setOutcome(_ outcome: Result<TokenSet, AuthGateError>?) { self.outcome = outcome }
}

private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

@Suite("Sessions")
struct SessionManagerTests {
    let clock = ManualClock()
    let key = SessionKey(uid: 1000, provider: ProviderID("mock")!, name: .default)

    private func manager(limits: RefreshQueue.Limits = .standard) -> SessionManager {
        SessionManager(
            logger: quiet,
            refreshLimits: limits,
            now: { [clock] in clock.now },
            random: { [clock] in clock.random }
        )
    }

    private func signIn(
        _ sessions: SessionManager,
        _ provider: any IdentityProvider,
        key: SessionKey? = nil,
        grant: Grant = .password,
        policy: RefreshPolicy = RefreshPolicy()
    ) async throws {
        let result =
            grant == .clientCredentials
            ? try await provider.signInAsClient(TokenVariant())
            : try await provider.signIn(PasswordCredentials(username: "u", password: Secret("p")))
        _ = await sessions.store(
            result,
            grant: grant,
            binding: SessionBinding(client: provider, policy: policy, storage: .memory),
            for: key ?? self.key
        )
    }

    private func currentToken(_ sessions: SessionManager) async throws -> String {
        try await sessions.token(for: key, minimumValidity: 0, forceRefresh: false).accessToken.exposedValue
    }

    // MARK: Single flight and failures on the caller's path

    @Test("1,000 concurrent token calls on an expiring session cause exactly one refresh")
    func singleFlight() async throws {
        // The refreshed token must satisfy the callers' minimum validity too: a caller that
        // arrives after the refresh has finished is served the new token, never sent to the
        // gate again (where nobody would release it).
        let provider = ScriptedProvider(clock: clock, gated: true, lifetime: 600)
        let sessions = manager()
        try await signIn(sessions, provider)
        clock.advance(by: 500)  // 100 s left: less than the 120 s asked for
        let key = key
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<1000 {
                group.addTask {
                    try await sessions.token(for: key, minimumValidity: 120, forceRefresh: false).accessToken.exposedValue
                }
            }
            await provider.waitForRefresh()
            await provider.release()
            var tokens: [String] = []
            for try await token in group { tokens.append(token) }
            #expect(tokens == Array(repeating: "at-1", count: 1000))
        }
        #expect(await provider.refreshCount == 1)
    }

    @Test("a refused refresh clears the session at once: login_required")
    func refusedRefresh() async throws {
        let provider = ScriptedProvider(clock: clock)
        await provider.setOutcome(.failure(AuthGateError(.loginRequired, "refused")))
        let sessions = manager()
        try await signIn(sessions, provider)
        await #expect(throws: AuthGateError(.loginRequired, "")) {
            try await sessions.token(for: key, minimumValidity: 120, forceRefresh: false)
        }
        let status = await sessions.status(uid: 1000, provider: nil)
        #expect(status.first?.state == .loginRequired)
        #expect(status.first?.expiresAt == nil)
        #expect(status.first?.nextRefreshAt == nil)
        await #expect(throws: AuthGateError(.loginRequired, "")) { try await currentToken(sessions) }
    }

    @Test("a failed refresh keeps serving the current token while it is still valid")
    func transientFailureOnCallerPath() async throws {
        let provider = ScriptedProvider(clock: clock)
        await provider.setOutcome(.failure(AuthGateError(.serviceUnavailable, "down")))
        let sessions = manager()
        try await signIn(sessions, provider)
        #expect(try await sessions.token(for: key, minimumValidity: 120, forceRefresh: false).accessToken.exposedValue == "first")
        let status = try #require(await sessions.status(uid: 1000, provider: nil).first)
        #expect(status.state == .authenticated)
        #expect(status.lastError == "down")
    }

    @Test("a client-credentials session re-acquires instead of refreshing")
    func clientCredentialsReacquire() async throws {
        let provider = ScriptedProvider(clock: clock)
        let sessions = manager()
        try await signIn(sessions, provider, grant: .clientCredentials)
        let token = try await sessions.token(for: key, minimumValidity: 120, forceRefresh: false)
        #expect(token.accessToken.exposedValue == "client-2")
        #expect(await provider.refreshCount == 0)
        clock.advance(by: 60)
        await sessions.refreshDue()
        await sessions.waitForRefreshes()
        #expect(await provider.clientSignIns == 3)
    }

    @Test("sessions are keyed by uid: another uid sees nothing")
    func isolation() async throws {
        let provider = ScriptedProvider(clock: clock)
        let sessions = manager()
        try await signIn(sessions, provider)
        #expect(await sessions.status(uid: 1000, provider: nil).count == 1)
        #expect(await sessions.status(uid: 1001, provider: nil).isEmpty)
        let other = SessionKey(uid: 1001, provider: key.provider, name: .default)
        await #expect(throws: AuthGateError(.loginRequired, "")) {
            try await sessions.token(for: other, minimumValidity: 0, forceRefresh: false)
        }
        #expect(await sessions.remove(other) == nil)
        #expect(await sessions.count(uid: 1000) == 1)
    }

    // MARK: Background refresh

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

    @Test("Retry-After is honoured")
    func retryAfter() async throws {
        let provider = ScriptedProvider(clock: clock)
        let sessions = manager()
        try await signIn(sessions, provider)
        await provider.setOutcome(.failure(AuthGateError(.serviceUnavailable, "busy", retryAfterSeconds: 120)))
        _ = try await sessions.token(for: key, minimumValidity: 120, forceRefresh: false)
        let planned = try #require(await sessions.status(uid: 1000, provider: nil).first?.nextRefreshAt)
        #expect(planned == clock.now.addingTimeInterval(120))
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

    @Test("scopes and resource: obtained with the refresh token, cached per combination, rotation kept")
    func variants() async throws {
        let provider = ScriptedProvider(clock: clock, lifetime: 600)
        let sessions = manager()
        try await signIn(sessions, provider)
        let read = TokenVariant(scopes: ["read", "read"])
        let api = TokenVariant(resource: "https://api.example.com")
        let first = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false, variant: read)
        #expect(first.scopes == ["read"])
        #expect(first.refreshToken == nil)
        #expect(
            try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false, variant: TokenVariant(scopes: ["read"])).accessToken
                == first.accessToken
        )
        let second = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false, variant: api)
        #expect(second.accessToken != first.accessToken)
        #expect(await provider.variantsAsked == [read, api])
        // The session's own token is untouched, and its refresh token is the rotated one.
        #expect(try await currentToken(sessions) == "first")
        _ = try await sessions.token(for: key, minimumValidity: 0, forceRefresh: true)
        #expect(await provider.refreshTokensSpent == ["rt-0", "rt-1", "rt-2"])
    }

    @Test("at most 16 narrower tokens are cached per session; the one expiring first makes room")
    func variantsBounded() async throws {
        let provider = ScriptedProvider(clock: clock, lifetime: 600)
        let sessions = manager()
        try await signIn(sessions, provider)
        for index in 0..<40 {
            _ = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false, variant: TokenVariant(scopes: ["s\(index)"]))
            clock.advance(by: 1)
        }
        #expect(await sessions.variantCount(for: key) == SessionManager.maximumVariantsPerSession)
        // The newest is still cached: no request for it.
        let asked = await provider.refreshCount
        _ = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false, variant: TokenVariant(scopes: ["s39"]))
        #expect(await provider.refreshCount == asked)
    }

    // MARK: Where the work runs

    @Test("a persistent sign-in asked from an event loop, as an RPC request asks it, is saved on the session manager's thread")
    func savesOffTheEventLoop() async throws {
        let scratch = try ScratchDirectory()
        let keeper = StorageKeyKeeper(
            stateDirectory: scratch.path + "/state",
            credentialsDirectory: nil,
            choice: .file,
            mode: .user,
            environment: ["PATH": "/usr/bin:/bin"]
        )
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let observer = ThreadRecordingObserver(loop: loop)
        let sessions = SessionManager(
            logger: quiet,
            persistence: SessionPersistence(keeper: keeper, logger: quiet),
            observer: observer,
            now: { [clock] in clock.now }
        )
        let provider = ScriptedProvider(clock: clock)
        let result = try await provider.signIn(PasswordCredentials(username: "u", password: Secret("p")))
        let key = key
        let callerOnLoop = await Task(executorPreference: EventLoopTaskExecutor(loop)) {
            let callerOnLoop = loop.inEventLoop
            _ = await sessions.store(
                result,
                grant: .password,
                binding: SessionBinding(client: provider, policy: RefreshPolicy(), storage: .persistent),
                for: key
            )
            return callerOnLoop
        }.value
        #expect(callerOnLoop, "the caller runs on the event loop, as request tasks do")
        let seen = observer.seen
        #expect(!seen.isEmpty)
        #expect(seen.allSatisfy { !$0.onCallersLoop && $0.onSessionsThread }, "the session manager's work (and its save) ran on the caller's loop")
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/state/sessions/1000.sessions"))
    }
}

/// Notes, at every change the session manager makes, which thread it made it on.
private final class ThreadRecordingObserver: SessionObserver {
    struct Seen {
        var onCallersLoop: Bool
        var onSessionsThread: Bool
    }
    private let loop: any EventLoop
    private let recorded = Mutex<[Seen]>([])
    init(loop: any EventLoop) { self.loop = loop }
    var seen: [Seen] { recorded.withLock { $0 } }
    private func note() { recorded.withLock { $0.append(Seen(onCallersLoop: loop.inEventLoop, onSessionsThread: SessionManager.thread.inEventLoop)) } }
    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) { note() }
    func withdraw(_ key: SessionKey) { note() }
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) { note() }
    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) { note() }
}
