import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateCore
@testable import AuthGateDaemon

/// A provider whose device sign-in the test approves, denies or leaves pending.
private actor DeviceProvider: IdentityProvider {
    enum Decision { case approve, deny }
    private var decision: Decision?
    /// The sign-ins waiting for the decision, each resumed once: by it, or with `nil` when its
    /// task is cancelled.
    private var waiting: [Int: CheckedContinuation<Decision?, Never>] = [:]
    private var nextWaiter = 0
    private(set) var begun = 0
    private(set) var revoked: [String] = []

    func decide(_ decision: Decision) {
        self.decision = decision
        for waiter in waiting.values { waiter.resume(returning: decision) }
        waiting = [:]
    }

    /// The decision, once the test makes it; `nil` when the task is cancelled first.
    private func awaitDecision() async -> Decision? {
        if let decision { return decision }
        let waiter = nextWaiter
        nextWaiter += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Cancelled before it waits: the handler below found nothing to resume.
                if Task.isCancelled { continuation.resume(returning: nil) } else { waiting[waiter] = continuation }
            }
        } onCancel: {
            Task { await self.cancel(waiter) }
        }
    }

    private func cancel(_ waiter: Int) {
        waiting.removeValue(forKey: waiter)?.resume(returning: nil)
    }

    func beginDeviceAuthorization(scopes: [String]) async throws(AuthGateError) -> DeviceAuthorization {
        begun += 1
        return DeviceAuthorization(
            deviceCode: Secret("device-code-\(begun)"),
            userCode: "ABCD-EFGH",
            verificationURI: URL(string: "https://idp.example/device")!,
            verificationURIComplete: nil,
            expiresAt: Date().addingTimeInterval(600),
            interval: 5
        )
    }

    /// Waits for the test's decision; `nil` once cancelled, as the protocol asks.
    func awaitDeviceAuthorization(_ authorization: DeviceAuthorization, scopes: [String]) async -> Result<SignInResult, AuthGateError>? {
        switch await awaitDecision() {
        case .approve?:
            return .success(
                SignInResult(
                    tokens: TokenSet(
                        accessToken: Secret("at-\(authorization.deviceCode.exposedValue)"),
                        expiresAt: Date().addingTimeInterval(3600),
                        refreshToken: Secret("rt")
                    ),
                    subject: "alice"
                )
            )
        case .deny?:
            return .failure(AuthGateError(.permissionDenied, "denied"))
        case nil:
            return nil
        }
    }

    func revoke(_ tokens: TokenSet) async { revoked.append(tokens.accessToken.exposedValue) }

    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] { [:] }
    func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet { throw AuthGateError(.loginRequired, "no") }
}

/// A provider whose browser sign-in request is recorded (its `prompt`), never completed.
private actor BrowserProvider: IdentityProvider {
    private(set) var prompts: [String?] = []

    func authorizationRequest(redirectURI: URL, scopes: [String], prompt: String?) async throws(AuthGateError) -> AuthorizationRequest {
        prompts.append(prompt)
        return AuthorizationRequest(
            url: URL(string: "https://idp.example/authorize")!,
            redirectURI: redirectURI,
            state: Secret("state"),
            nonce: nil,
            codeVerifier: Secret("verifier"),
            scopes: scopes,
            issuer: nil,
            requiresIssuer: false
        )
    }

    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] { [:] }
    func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet { throw AuthGateError(.loginRequired, "no") }
    func revoke(_ tokens: TokenSet) async {}
}

/// `LoginFlowManager` in process, with a scripted provider: joining, completion, cancel,
/// expiry, ownership and the per-uid bound, with no server, browser or socket.
@Suite("Interactive sign-in flows (in process)")
struct LoginFlowManagerTests {
    private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    private let key = SessionKey(uid: 1000, provider: ProviderID("corp")!, name: .default)
    private let configuration: ProviderConfiguration = ProviderConfigurationLoader.parse(
        Data(#"{"type": "oidc", "issuer": "https://idp.example", "client_id": "c", "grants": ["device_code"]}"#.utf8),
        id: "corp",
        file: "corp.json"
    ).configuration!

    private func begin(_ flows: LoginFlowManager, _ provider: DeviceProvider, key: SessionKey? = nil) async throws -> PendingSignIn {
        try await flows.begin(key: key ?? self.key, grant: .deviceCode, scopes: [], prompt: nil, configuration: configuration, client: provider)
    }

    /// What `login.complete` waits for: the flow's outcome.
    private func outcome(_ flows: LoginFlowManager, _ id: String, uid: UInt32 = 1000) async throws -> Result<SignedInSession, AuthGateError> {
        let (finished, waiting) = try await flows.outcomeOrWait(id, uid: uid)
        if let finished { return finished }
        let (updates, waiter) = try #require(waiting)
        for await _ in updates { break }
        await flows.stopWaiting(id, waiter: waiter)
        return try #require(try await flows.outcome(of: id, uid: uid))
    }

    @Test("at most 8 callers wait for one flow at once (rate_limited beyond); one that stops waiting frees its place; the end reaches them all")
    func waitersBounded() async throws {
        let sessions = SessionManager(logger: quiet)
        let flows = LoginFlowManager(sessions: sessions, logger: quiet)
        let provider = DeviceProvider()
        let flow = try await begin(flows, provider)
        var waiting: [(AsyncStream<Void>, waiter: Int)] = []
        for _ in 0..<LoginFlowManager.maximumWaitersPerFlow {
            waiting.append(try #require(try await flows.outcomeOrWait(flow.flowID, uid: 1000).1))
        }
        let refused = await #expect(throws: AuthGateError.self) { _ = try await flows.outcomeOrWait(flow.flowID, uid: 1000) }
        #expect(refused?.reason == .rateLimited, "\(String(describing: refused))")
        await flows.stopWaiting(flow.flowID, waiter: waiting.removeLast().waiter)
        waiting.append(try #require(try await flows.outcomeOrWait(flow.flowID, uid: 1000).1))
        await provider.decide(.approve)
        for (updates, _) in waiting {
            for await _ in updates { break }
        }
        #expect(try await flows.outcome(of: flow.flowID, uid: 1000)?.get().subject == "alice")
    }

    @Test("a second begin for the same session joins the flow; the approval stores the session")
    func joinAndComplete() async throws {
        let sessions = SessionManager(logger: quiet)
        let flows = LoginFlowManager(sessions: sessions, logger: quiet)
        let provider = DeviceProvider()
        let first = try await begin(flows, provider)
        let second = try await begin(flows, provider)
        #expect(first.flowID == second.flowID && first.userCode == "ABCD-EFGH")
        #expect(await provider.begun == 1, "one device code for both")
        await provider.decide(.approve)
        let signedIn = try await outcome(flows, first.flowID).get()
        #expect(signedIn.subject == "alice" && signedIn.key == key)
        #expect(try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false).accessToken.exposedValue == "at-device-code-1")
    }

    @Test("a denial ends the flow with permission_denied")
    func denied() async throws {
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), logger: quiet)
        let provider = DeviceProvider()
        let pending = try await begin(flows, provider)
        await provider.decide(.deny)
        let result = try await outcome(flows, pending.flowID)
        if case .failure(let error) = result { #expect(error.reason == .permissionDenied) } else { Issue.record("not denied: \(result)") }
    }

    @Test("cancel: the waiters get login_cancelled, and a second cancel says false")
    func cancel() async throws {
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), logger: quiet)
        let provider = DeviceProvider()
        let pending = try await begin(flows, provider)
        #expect(try await flows.cancel(pending.flowID, uid: 1000))
        #expect(try await !flows.cancel(pending.flowID, uid: 1000))
        let result = try await outcome(flows, pending.flowID)
        if case .failure(let error) = result { #expect(error.reason == .loginCancelled) } else { Issue.record("not cancelled: \(result)") }
    }

    @Test("a flow past its lifetime ends with flow_expired")
    func expiry() async throws {
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), settings: LoginFlowSettings(lifetime: 0.2), logger: quiet)
        let pending = try await begin(flows, DeviceProvider())
        let result = try await outcome(flows, pending.flowID)
        if case .failure(let error) = result { #expect(error.reason == .flowExpired) } else { Issue.record("not expired: \(result)") }
    }

    @Test("another uid's flow does not exist for the caller; a uid's pending flows are bounded")
    func ownershipAndBound() async throws {
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), settings: LoginFlowSettings(maximumPendingPerUser: 2), logger: quiet)
        let provider = DeviceProvider()
        let mine = try await begin(flows, provider)
        await #expect(throws: AuthGateError.self) { try await flows.cancel(mine.flowID, uid: 1001) }
        await #expect(throws: AuthGateError.self) { try await flows.outcome(of: mine.flowID, uid: 1001) }
        _ = try await begin(flows, provider, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName("second")!))
        do {
            _ = try await begin(flows, provider, key: SessionKey(uid: 1000, provider: key.provider, name: SessionName("third")!))
            Issue.record("a third pending flow was allowed")
        } catch let error as AuthGateError {
            #expect(error.reason == .rateLimited)
        }
        // Another uid has its own allowance.
        _ = try await begin(flows, provider, key: SessionKey(uid: 1001, provider: key.provider, name: .default))
    }

    @Test(
        "new sign-ins are limited per uid and provider: a begin-and-cancel loop is refused (rate_limited, with when) after the burst and asks the provider no more; another uid still begins; time gives one back"
    )
    func startsLimited() async throws {
        let clock = Mutex<Date>(Date(timeIntervalSince1970: 1_000_000))
        var settings = LoginFlowSettings()
        settings.startBurst = 3
        settings.startInterval = 10
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), settings: settings, now: { clock.withLock { $0 } }, logger: quiet)
        let provider = DeviceProvider()
        var refusal: AuthGateError?
        for _ in 0..<20 {
            do {
                let pending = try await begin(flows, provider)
                _ = try await flows.cancel(pending.flowID, uid: key.uid)
            } catch let error as AuthGateError {
                refusal = error
                break
            }
        }
        #expect(refusal?.reason == .rateLimited && refusal?.retryAfterSeconds == 10, "\(String(describing: refusal))")
        #expect(await provider.begun == 3, "the provider asked once per start allowed")
        _ = try await begin(flows, provider, key: SessionKey(uid: 1001, provider: key.provider, name: .default))
        clock.withLock { $0 += 10 }
        let again = try await begin(flows, provider)
        _ = try await flows.cancel(again.flowID, uid: key.uid)
        await #expect(throws: AuthGateError.self) { try await begin(flows, provider) }
    }

    @Test(
        "a caller joining a sign-in makes its consent choice stricter, never looser: a flow begun to stop asking, joined by a plain sign-in, leaves the session asking"
    )
    func joinNeverLoosensConsent() async throws {
        let sessions = SessionManager(logger: quiet)
        let flows = LoginFlowManager(sessions: sessions, logger: quiet)
        let first = DeviceProvider()
        let asking = try await flows.begin(key: key, grant: .deviceCode, scopes: [], prompt: nil, consent: .ask, configuration: configuration, client: first)
        await first.decide(.approve)
        _ = try await outcome(flows, asking.flowID)
        #expect(await sessions.asksConsent(key))

        // Begun (by any program of the uid) to stop asking; the person's own sign-in joins it.
        let second = DeviceProvider()
        let loosening = try await flows.begin(
            key: key,
            grant: .deviceCode,
            scopes: [],
            prompt: nil,
            consent: .stopAsking,
            configuration: configuration,
            client: second
        )
        let joined = try await flows.begin(key: key, grant: .deviceCode, scopes: [], prompt: nil, consent: .keep, configuration: configuration, client: second)
        #expect(joined.flowID == loosening.flowID)
        await second.decide(.approve)
        _ = try await outcome(flows, loosening.flowID)
        #expect(await sessions.asksConsent(key), "still asks")
        #expect(ConsentChoice.stopAsking.stricter(.stopAsking) == .stopAsking && ConsentChoice.keep.stricter(.ask) == .ask)
    }

    @Test("a browser sign-in that would stop a session's asking has the provider make the person sign in (prompt=login); one that changes nothing does not")
    func stoppingAskingNeedsAPerson() async throws {
        let sessions = SessionManager(logger: quiet)
        let flows = LoginFlowManager(sessions: sessions, logger: quiet)
        let client = ScriptedProvider(clock: ManualClock())
        let signIn = try await client.signIn(PasswordCredentials(username: "u", password: Secret("p")))
        let memory = SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory)
        _ = await sessions.store(signIn, grant: .password, binding: memory, for: key, consent: .ask)
        let other = SessionKey(uid: 1000, provider: key.provider, name: SessionName("other")!)
        _ = await sessions.store(signIn, grant: .password, binding: memory, for: other)

        let browser = BrowserProvider()
        for (session, choice) in [(key, ConsentChoice.stopAsking), (other, .stopAsking), (key, .keep)] {
            let pending = try await flows.begin(
                key: session,
                grant: .authorizationCode,
                scopes: [],
                prompt: nil,
                consent: choice,
                configuration: configuration,
                client: browser
            )
            _ = try await flows.cancel(pending.flowID, uid: key.uid)
        }
        // A prompt the caller asked for (one click: select_account) gives way to login.
        let asked = try await flows.begin(
            key: key,
            grant: .authorizationCode,
            scopes: [],
            prompt: "select_account",
            consent: .stopAsking,
            configuration: configuration,
            client: browser
        )
        _ = try await flows.cancel(asked.flowID, uid: key.uid)
        #expect(await browser.prompts == ["login", nil, nil, "login"])
    }

    @Test("a reload that changed or removed a provider ends its pending sign-ins (login_cancelled, saying why); another provider's stay")
    func reloadEndsSignIns() async throws {
        let flows = LoginFlowManager(sessions: SessionManager(logger: quiet), logger: quiet)
        let provider = DeviceProvider()
        let changed = try await begin(flows, provider)
        let elsewhere = try await begin(flows, provider, key: SessionKey(uid: 1000, provider: ProviderID("other")!, name: .default))
        await flows.endSignIns(provider: key.provider)
        let ended = try await outcome(flows, changed.flowID)
        guard case .failure(let error) = ended else {
            Issue.record("not ended: \(ended)")
            return
        }
        #expect(error.reason == .loginCancelled && error.message.contains("an administrator changed the provider"), "\(error)")
        #expect(try await flows.outcome(of: elsewhere.flowID, uid: 1000) == nil, "the other provider's sign-in is still pending")
        await provider.decide(.approve)
        _ = try await outcome(flows, elsewhere.flowID)
    }

    @Test(
        "a sign-in that comes back with a client a reload has retired meanwhile is not stored: login_cancelled, its tokens revoked; the provider's new client stores"
    )
    func retiredClientStoresNothing() async throws {
        let sessions = SessionManager(logger: quiet)
        let flows = LoginFlowManager(sessions: sessions, logger: quiet)
        let old = DeviceProvider()
        let pending = try await begin(flows, old)
        // The reload's answer came in between: the flow was not yet registered for it to end.
        await sessions.retire(old)
        await old.decide(.approve)
        let ended = try await outcome(flows, pending.flowID)
        guard case .failure(let error) = ended else {
            Issue.record("stored: \(ended)")
            return
        }
        #expect(error.reason == .loginCancelled && error.message.contains("changed by an administrator"), "\(error)")
        #expect(await !sessions.exists(key))
        #expect(await old.revoked.count == 1, "the tokens it got do not outlive it")

        let current = DeviceProvider()
        let again = try await begin(flows, current)
        await current.decide(.approve)
        _ = try await outcome(flows, again.flowID)
        #expect(await sessions.exists(key))
    }
}
