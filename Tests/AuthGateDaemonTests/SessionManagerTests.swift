import AuthGateCore
import AuthGateRPC
import Foundation
import Logging
import Synchronization
import Testing
@testable import AuthGateDaemon

/// A provider whose refreshes are counted and held until the test releases them.
private actor CountingProvider: IdentityProvider {
    private(set) var refreshCount = 0
    private var gate: CheckedContinuation<Void, Never>?
    private var waiting: [CheckedContinuation<Void, Never>] = []
    var outcome: Result<TokenSet, AuthGateError>
    let now: Date

    init(now: Date) {
        self.now = now
        outcome = .success(TokenSet(accessToken: Secret("refreshed"), expiresAt: now.addingTimeInterval(3600), refreshToken: Secret("rt-2")))
    }

    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult {
        SignInResult(tokens: TokenSet(accessToken: Secret("first"), expiresAt: now.addingTimeInterval(5), refreshToken: Secret("rt-1")), subject: "s")
    }

    func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult {
        throw AuthGateError(.unsupportedGrant, "no")
    }

    func refresh(_ refreshToken: Secret, scopes: [String]) async throws(AuthGateError) -> TokenSet {
        refreshCount += 1
        await withCheckedContinuation { gate = $0; waiting.forEach { $0.resume() }; waiting.removeAll() }
        return try outcome.get()
    }

    func revoke(_ tokens: TokenSet) async {}

    private(set) var clientSignIns = 0

    func signInAsClient(scopes: [String]) async throws(AuthGateError) -> SignInResult {
        clientSignIns += 1
        return SignInResult(tokens: TokenSet(accessToken: Secret("client-\(clientSignIns)"), expiresAt: now.addingTimeInterval(5)), subject: "client:x")
    }

    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] { [:] }

    /// Returns once a refresh is waiting at the gate.
    func waitForRefresh() async {
        if gate != nil { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        gate?.resume()
        gate = nil
    }

    func setOutcome(_ outcome: Result<TokenSet, AuthGateError>) { self.outcome = outcome }
}

@Suite("Sessions")
struct SessionManagerTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let key = SessionKey(uid: 1000, provider: ProviderID("mock")!, name: .default)

    private func signedIn(_ provider: CountingProvider) async throws -> SessionManager {
        let sessions = SessionManager(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { [now] in now })
        let signIn = try await provider.signIn(PasswordCredentials(username: "u", password: Secret("p")))
        _ = await sessions.store(signIn, grant: .password, for: key)
        return sessions
    }

    @Test("100 concurrent token calls on an expiring session cause exactly one refresh")
    func singleFlight() async throws {
        let provider = CountingProvider(now: now)
        let sessions = try await signedIn(provider)
        let key = key
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await sessions.token(for: key, provider: provider, minimumValidity: 60, forceRefresh: false).accessToken.exposedValue
                }
            }
            await provider.waitForRefresh()
            await provider.release()
            var tokens: [String] = []
            for try await token in group { tokens.append(token) }
            #expect(tokens == Array(repeating: "refreshed", count: 100))
        }
        #expect(await provider.refreshCount == 1)
    }

    @Test("a refused refresh clears the session: login_required")
    func refusedRefresh() async throws {
        let provider = CountingProvider(now: now)
        await provider.setOutcome(.failure(AuthGateError(.loginRequired, "refused")))
        let sessions = try await signedIn(provider)
        let key = key
        let attempt = Task { try await sessions.token(for: key, provider: provider, minimumValidity: 60, forceRefresh: false) }
        await provider.waitForRefresh()
        await provider.release()
        await #expect(throws: AuthGateError(.loginRequired, "")) { try await attempt.value }
        let status = await sessions.status(uid: 1000, provider: nil)
        #expect(status.first?.state == .loginRequired)
        #expect(status.first?.expiresAt == nil)
        await #expect(throws: AuthGateError(.loginRequired, "")) {
            try await sessions.token(for: key, provider: provider, minimumValidity: 0, forceRefresh: false)
        }
    }

    @Test("a failed refresh keeps serving the current token while it is still valid")
    func transientFailure() async throws {
        let provider = CountingProvider(now: now)
        await provider.setOutcome(.failure(AuthGateError(.serviceUnavailable, "down")))
        let sessions = try await signedIn(provider)
        let key = key
        let attempt = Task { try await sessions.token(for: key, provider: provider, minimumValidity: 60, forceRefresh: false) }
        await provider.waitForRefresh()
        await provider.release()
        #expect(try await attempt.value.accessToken.exposedValue == "first")
        let status = await sessions.status(uid: 1000, provider: nil)
        #expect(status.first?.state == .authenticated)
        #expect(status.first?.lastError == "down")
    }

    @Test("a client-credentials session re-acquires instead of refreshing")
    func clientCredentialsReacquire() async throws {
        let provider = CountingProvider(now: now)
        let sessions = SessionManager(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), now: { [now] in now })
        _ = await sessions.store(try await provider.signInAsClient(scopes: []), grant: .clientCredentials, for: key)
        let token = try await sessions.token(for: key, provider: provider, minimumValidity: 60, forceRefresh: false)
        #expect(token.accessToken.exposedValue == "client-2")
        #expect(await provider.refreshCount == 0)
        #expect(await provider.clientSignIns == 2)
    }

    @Test("sessions are keyed by uid: another uid sees nothing")
    func isolation() async throws {
        let provider = CountingProvider(now: now)
        let sessions = try await signedIn(provider)
        #expect(await sessions.status(uid: 1000, provider: nil).count == 1)
        #expect(await sessions.status(uid: 1001, provider: nil).isEmpty)
        let other = SessionKey(uid: 1001, provider: key.provider, name: .default)
        await #expect(throws: AuthGateError(.loginRequired, "")) {
            try await sessions.token(for: other, provider: provider, minimumValidity: 0, forceRefresh: false)
        }
        #expect(await sessions.remove(other) == nil)
        #expect(await sessions.count(uid: 1000) == 1)
    }
}
