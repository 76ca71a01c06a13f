import AuthGateCore
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon

/// The single flight of a service's first-use sign-in, in process: callers who found no session
/// at the same moment sign in once, whether they arrive while that sign-in runs or just after it.
@Suite("First-use sign-ins (single flight)")
struct FirstUseSignInsTests {
    private let key = SessionKey(uid: 1000, provider: ProviderID("svc")!, name: .default)

    @Test("callers arriving while the sign-in runs wait for it; one arriving after it ended (it saw no session a moment before) signs in no more")
    func oneSignIn() async throws {
        let signIns = FirstUseSignIns()
        let stored = Mutex(false)
        let count = Mutex(0)
        let (started, startedGate) = AsyncStream<Void>.makeStream()
        let (release, releaseGate) = AsyncStream<Void>.makeStream()
        let signIn: @Sendable () async -> Result<Void, AuthGateError> = {
            // The first sign-in is held until the other callers are there; later ones are not.
            if count.withLock({
                $0 += 1
                return $0
            }) == 1 {
                startedGate.yield()
                for await _ in release { break }
            }
            stored.withLock { $0 = true }
            return .success(())
        }
        let isSignedIn: @Sendable () async -> Bool = { stored.withLock { $0 } }
        let key = key
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await signIns.signIn(key, isSignedIn: isSignedIn, signIn) }
            for await _ in started { break }
            for _ in 0..<7 { group.addTask { try await signIns.signIn(key, isSignedIn: isSignedIn, signIn) } }
            releaseGate.yield()
            try await group.waitForAll()
        }
        // A caller whose read found no session before the sign-in above stored it.
        try await signIns.signIn(key, isSignedIn: isSignedIn, signIn)
        #expect(count.withLock { $0 } == 1)

        // Signed out: the next first use signs in again.
        stored.withLock { $0 = false }
        try await signIns.signIn(key, isSignedIn: isSignedIn, signIn)
        #expect(count.withLock { $0 } == 2)
    }

    @Test("a refused sign-in is remembered for the uid and provider: callers within its time get it without a request; after it, the next one asks again")
    func refusalRemembered() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let counted = Mutex<[FirstUseSignIns.Outcome]>([])
        let signIns = FirstUseSignIns(
            now: { clock.withLock { $0 } },
            random: { 0 },
            counted: { _, outcome in counted.withLock { $0.append(outcome) } }
        )
        let count = Mutex(0)
        let refuse: @Sendable () async -> Result<Void, AuthGateError> = {
            count.withLock { $0 += 1 }
            return .failure(AuthGateError(.providerUnavailable, "The provider is down."))
        }
        let throttled: @Sendable () async -> Result<Void, AuthGateError> = {
            count.withLock { $0 += 1 }
            return .failure(AuthGateError(.serviceUnavailable, "The provider throttles (429).", retryAfterSeconds: 30))
        }
        // The daemon's own limit (the uid's share of requests at providers) is not the provider's answer.
        let ownLimit: @Sendable () async -> Result<Void, AuthGateError> = {
            count.withLock { $0 += 1 }
            return .failure(AuthGateError(.rateLimited, "You have 4 requests at providers in flight already.", retryAfterSeconds: 1))
        }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, refuse) }
        // Another session name of the same uid and provider: the same client, the same answer.
        let other = SessionKey(uid: 1000, provider: key.provider, name: SessionName("ci")!)
        let remembered = await #expect(throws: AuthGateError.self) { try await signIns.signIn(other, isSignedIn: { false }, refuse) }
        #expect(remembered?.reason == .providerUnavailable && remembered?.retryAfterSeconds == 2, "\(String(describing: remembered))")
        #expect(count.withLock { $0 } == 1, "the provider was asked again within the remembered time")
        // Another uid is not answered from this uid's memory.
        let stranger = SessionKey(uid: 1001, provider: key.provider, name: .default)
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(stranger, isSignedIn: { false }, refuse) }
        #expect(count.withLock { $0 } == 2)

        clock.withLock { $0 += 3 }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, throttled) }
        #expect(count.withLock { $0 } == 3, "after the remembered time the next caller asks again")
        clock.withLock { $0 += 29 }
        let waiting = await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, throttled) }
        #expect(waiting?.reason == .serviceUnavailable && waiting?.retryAfterSeconds == 1 && count.withLock { $0 } == 3, "the provider's Retry-After is kept")
        clock.withLock { $0 += 1 }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, throttled) }
        #expect(count.withLock { $0 } == 4)
        clock.withLock { $0 += 31 }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, ownLimit) }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, ownLimit) }
        #expect(count.withLock { $0 } == 6, "a refusal of the daemon's own is not remembered")
        #expect(counted.withLock { $0 } == [.attempted, .remembered, .attempted, .attempted, .remembered, .attempted, .attempted, .attempted])
    }

    @Test("the daemon's stop cancels a sign-in waiting out the spread (its caller is told, the provider never asked) and starts none after")
    func stopCancelsWaitingSignIns() async throws {
        let waiting = AsyncStream<Void>.makeStream()
        let signIns = FirstUseSignIns(
            random: { 0.5 },
            wait: { _ in
                waiting.continuation.yield()
                try? await Task.sleep(for: .seconds(3600))
            }
        )
        let asked = Mutex(0)
        let signIn: @Sendable () async -> Result<Void, AuthGateError> = {
            asked.withLock { $0 += 1 }
            return .success(())
        }
        let caller = Task { () -> AuthGateError? in
            do throws(AuthGateError) {
                try await signIns.signIn(key, policy: RefreshPolicy(firstUseSpreadSeconds: 300), isSignedIn: { false }, signIn)
                return nil
            } catch {
                return error
            }
        }
        var waits = waiting.stream.makeAsyncIterator()
        _ = await waits.next()
        await signIns.shutdown()
        let error = await caller.value
        #expect(error?.reason == .serviceUnavailable && error?.message.contains("stopping") == true, "\(String(describing: error))")
        let after = await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, signIn) }
        #expect(after?.reason == .serviceUnavailable)
        #expect(asked.withLock { $0 } == 0, "the provider was asked")
    }

    @Test(
        "with first_use_spread_seconds, a sign-in in the daemon's first that many seconds waits a random part of what is left of them (none after the window, none without the setting)"
    )
    func firstUsesSpreadOverTheWindow() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let draws = Mutex([0.5, 0.75, 0.5, 0.9])
        let waited = Mutex<[TimeInterval]>([])
        let signIns = FirstUseSignIns(
            now: { clock.withLock { $0 } },
            random: { draws.withLock { $0.isEmpty ? 0 : $0.removeFirst() } },
            wait: { seconds in waited.withLock { $0.append(seconds) } }
        )
        let spread = RefreshPolicy(firstUseSpreadSeconds: 8)
        let asked = Mutex(0)
        let signIn: @Sendable () async -> Result<Void, AuthGateError> = {
            asked.withLock { $0 += 1 }
            return .success(())
        }
        func session(_ name: String) -> SessionKey { SessionKey(uid: 1000, provider: key.provider, name: SessionName(name)!) }
        // At the start, random 0.5 of 8 s: 4 s.
        try await signIns.signIn(session("a"), policy: spread, isSignedIn: { false }, signIn)
        // 6 s in, random 0.75 of the 2 s left: 1.5 s.
        clock.withLock { $0 += 6 }
        try await signIns.signIn(session("b"), policy: spread, isSignedIn: { false }, signIn)
        // 8 s in: the window is over, no wait whatever is drawn.
        clock.withLock { $0 += 2 }
        try await signIns.signIn(session("c"), policy: spread, isSignedIn: { false }, signIn)
        // Without the setting nothing waits, whatever is drawn.
        try await signIns.signIn(session("d"), isSignedIn: { false }, signIn)
        #expect(waited.withLock { $0 } == [4, 1.5])
        #expect(asked.withLock { $0 } == 4)
        #expect(abs(RefreshPolicy(firstUseSpreadSeconds: 8).firstUseWait(sinceStart: 7.5, random: 0.5) - 0.25) < 1e-9)
        #expect(RefreshPolicy(firstUseSpreadSeconds: 8).firstUseWait(sinceStart: 9, random: 0.99) == 0)
        #expect(RefreshPolicy().firstUseWait(sinceStart: 0, random: 0.99) == 0)
    }

    @Test(
        "a throttling provider is asked again only after its Retry-After, at a random point of a window that widens with each throttling in a row, and narrows again after a success"
    )
    func throttlingSpreadsTheRetries() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let signIns = FirstUseSignIns(now: { clock.withLock { $0 } }, random: { 0.5 })
        let asked = Mutex(0)
        let answer = Mutex<Result<Void, AuthGateError>>(.failure(AuthGateError(.serviceUnavailable, "429", retryAfterSeconds: 2)))
        let signIn: @Sendable () async -> Result<Void, AuthGateError> = {
            asked.withLock { $0 += 1 }
            return answer.withLock { $0 }
        }
        /// Seconds until the provider is asked again, found by stepping the clock.
        func waitAfterAttempt() async throws -> Int {
            await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, signIn) }
            let before = asked.withLock { $0 }
            for second in 1...120 {
                clock.withLock { $0 += 1 }
                _ = try? await signIns.signIn(key, isSignedIn: { false }, signIn)
                if asked.withLock({ $0 }) > before { return second }
            }
            return -1
        }
        // Retry-After 2 s, random 0.5: 2 × (1 + 4 × 0.5) = 6 s, then 2 × (1 + 8 × 0.5) = 10 s.
        let first = try await waitAfterAttempt()
        #expect(first == 6, "\(first)")
        let second = try await waitAfterAttempt()
        #expect(second == 10, "\(second)")
        // The retry that came through succeeded: the next throttling starts narrow again.
        answer.withLock { $0 = .success(()) }
        clock.withLock { $0 += 20 }
        try await signIns.signIn(key, isSignedIn: { false }, signIn)
        answer.withLock { $0 = .failure(AuthGateError(.serviceUnavailable, "429", retryAfterSeconds: 2)) }
        let fresh = SessionKey(uid: 1000, provider: key.provider, name: SessionName("later")!)
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(fresh, isSignedIn: { false }, signIn) }
        let remembered = await #expect(throws: AuthGateError.self) { try await signIns.signIn(fresh, isSignedIn: { false }, signIn) }
        #expect(remembered?.retryAfterSeconds == 6, "\(String(describing: remembered))")
        // A Retry-After past the window's cap (300 s) is kept, with one more of it to spread
        // over: 400 + 400 × 0.5, not 300 for every daemon.
        answer.withLock { $0 = .failure(AuthGateError(.serviceUnavailable, "429", retryAfterSeconds: 400)) }
        clock.withLock { $0 += 10 }
        let long = SessionKey(uid: 1000, provider: key.provider, name: SessionName("long")!)
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(long, isSignedIn: { false }, signIn) }
        let held = await #expect(throws: AuthGateError.self) { try await signIns.signIn(long, isSignedIn: { false }, signIn) }
        #expect(held?.retryAfterSeconds == 600, "\(String(describing: held))")
    }

    @Test("one uid's first sign-ins to a provider are rate-limited (a burst, then one a second); another uid and root are not held by it")
    func rateLimited() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let signIns = FirstUseSignIns(limits: .init(burst: 3, perSecond: 1), now: { clock.withLock { $0 } })
        let count = Mutex(0)
        let succeed: @Sendable () async -> Result<Void, AuthGateError> = {
            count.withLock { $0 += 1 }
            return .success(())
        }
        func session(_ uid: UInt32, _ index: Int) -> SessionKey { SessionKey(uid: uid, provider: key.provider, name: SessionName("s\(index)")!) }
        for index in 0..<3 { try await signIns.signIn(session(1000, index), isSignedIn: { false }, succeed) }
        let refused = await #expect(throws: AuthGateError.self) { try await signIns.signIn(session(1000, 3), isSignedIn: { false }, succeed) }
        #expect(refused?.reason == .rateLimited && refused?.retryAfterSeconds == 1, "\(String(describing: refused))")
        #expect(refused?.message.contains("too many sign-ins to svc") == true)
        #expect(count.withLock { $0 } == 3)
        try await signIns.signIn(session(1001, 0), isSignedIn: { false }, succeed)
        try await signIns.signIn(session(0, 0), bounded: false, isSignedIn: { false }, succeed)
        clock.withLock { $0 += 1 }
        try await signIns.signIn(session(1000, 4), isSignedIn: { false }, succeed)
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(session(1000, 5), isSignedIn: { false }, succeed) }
        #expect(count.withLock { $0 } == 6)
    }
}

/// The sessions one uid may hold, counted with the sign-ins under way: many at once cannot
/// together pass the limit (they each saw room before any was stored).
@Suite("Session room per uid")
struct SessionRoomTests {
    @Test("sign-ins under way hold their room: a third new session is refused while two are being signed in; released room is free again")
    func reservedRoomCounts() async throws {
        let sessions = SessionManager(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), maximumSessionsPerUser: 2)
        func key(_ name: String, uid: UInt32 = 1000) -> SessionKey { SessionKey(uid: uid, provider: ProviderID("svc")!, name: SessionName(name)!) }
        try await sessions.reserveRoom(for: key("a"))
        try await sessions.reserveRoom(for: key("b"))
        // The same session again is the same room.
        try await sessions.reserveRoom(for: key("b"))
        let refused = await #expect(throws: AuthGateError.self) { try await sessions.reserveRoom(for: key("c")) }
        #expect(refused?.reason == .rateLimited && refused?.message.contains("You have 2 sessions") == true)
        try await sessions.reserveRoom(for: key("c", uid: 1001))
        await sessions.releaseRoom(for: key("b"))
        await #expect(throws: AuthGateError.self) { try await sessions.reserveRoom(for: key("c")) }
        await sessions.releaseRoom(for: key("b"))
        try await sessions.reserveRoom(for: key("c"))
    }
}
