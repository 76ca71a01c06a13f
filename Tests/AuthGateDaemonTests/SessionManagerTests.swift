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
@testable import AuthGateServer

/// A provider whose refreshes are counted and, when `gated`, held until the test releases them.
actor ScriptedProvider: IdentityProvider {
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

    func manager(limits: RefreshQueue.Limits = .standard) -> SessionManager {
        SessionManager(
            logger: quiet,
            refreshLimits: limits,
            now: { [clock] in clock.now },
            random: { [clock] in clock.random }
        )
    }

    func signIn(
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

    func currentToken(_ sessions: SessionManager) async throws -> String {
        try await sessions.token(for: key, minimumValidity: 0, forceRefresh: false).accessToken.exposedValue
    }

    // MARK: Single flight and failures on the caller's path

    @Test("one uid may force 10 refreshes of a provider's sessions, then one every 5 s (rate_limited with the wait); another uid and root are not held by it")
    func forcedRefreshesLimited() async throws {
        let provider = ScriptedProvider(clock: clock, lifetime: 3600)
        let sessions = manager()
        let stranger = SessionKey(uid: 1001, provider: key.provider, name: .default)
        try await signIn(sessions, provider)
        try await signIn(sessions, provider, key: stranger)
        func force(_ key: SessionKey, bounded: Bool = true) async -> AuthGateError? {
            do {
                _ = try await sessions.token(for: key, minimumValidity: 0, forceRefresh: true, bounded: bounded)
                return nil
            } catch {
                return error
            }
        }
        for _ in 0..<10 { #expect(await force(key) == nil) }
        let refused = await force(key)
        #expect(refused?.reason == .rateLimited && refused?.retryAfterSeconds == 5, "\(String(describing: refused))")
        #expect(await provider.refreshCount == 10)
        #expect(await force(stranger) == nil, "another uid has its own")
        #expect(await force(key, bounded: false) == nil, "root and the daemon's user are not bound")
        clock.advance(by: 5)
        #expect(await force(key) == nil)
        #expect(await provider.refreshCount == 13)
    }

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
    private func note() { recorded.withLock { $0.append(Seen(onCallersLoop: loop.inEventLoop, onSessionsThread: SessionStore.thread.inEventLoop)) } }
    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int>, for key: SessionKey) { note() }
    func withdraw(_ key: SessionKey) { note() }
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) { note() }
    func sessionEnded(_ key: SessionKey, _ ending: SessionEnding, message: String) { note() }
    func consentChoiceChanged(_ key: SessionKey, asks: Bool) { note() }
}
