import AuthGateCore
import AuthGateTestSupport
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

    @Test("a refused sign-in reaches every waiting caller, and the next caller tries again")
    func refusal() async throws {
        let signIns = FirstUseSignIns()
        let count = Mutex(0)
        let refuse: @Sendable () async -> Result<Void, AuthGateError> = {
            count.withLock { $0 += 1 }
            return .failure(AuthGateError(.providerUnavailable, "The provider is down."))
        }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, refuse) }
        await #expect(throws: AuthGateError.self) { try await signIns.signIn(key, isSignedIn: { false }, refuse) }
        #expect(count.withLock { $0 } == 2)
    }
}
