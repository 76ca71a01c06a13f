import AuthGateCore
import Foundation
import Synchronization
import Testing

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

private func makeProvider(
    clock: TestClock = TestClock(),
    policy: PasswordPolicy = PasswordPolicy(),
    allowRegistration: Bool = true,
    latency: ClosedRange<Int> = 0...0
) -> MockIdentityProvider {
    let settings = MockProviderSettings(
        users: [.init(username: "demo", password: Secret("demo-password-1"), email: "demo@example.com")],
        latencyMilliseconds: latency,
        accessTokenLifetimeSeconds: 60,
        refreshTokenLifetimeSeconds: 600,
        allowRegistration: allowRegistration,
        passwordPolicy: policy
    )
    return MockIdentityProvider(settings: settings, defaultScopes: ["profile"], now: { clock.now })
}

/// The error a throwing call produced, or `nil`.
private func error<T>(_ body: () async throws(AuthGateError) -> T) async -> AuthGateError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

@Suite("The mock provider")
struct MockIdentityProviderTests {
    @Test("a predefined user signs in and gets opaque tokens with the configured lifetime")
    func signIn() async throws {
        let clock = TestClock()
        let provider = makeProvider(clock: clock)
        let result = try await provider.signIn(PasswordCredentials(username: "Demo", password: Secret("demo-password-1")))
        #expect(result.subject == "mock:demo")
        #expect(result.tokens.expiresAt == clock.now.addingTimeInterval(60))
        #expect(result.tokens.accessToken.exposedValue.hasPrefix("mock_at_"))
        #expect(result.tokens.accessToken.exposedValue.count > 40)
        #expect(result.tokens.refreshToken != nil)
        #expect(result.tokens.scopes == ["profile"])
        let again = try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("demo-password-1")))
        #expect(again.tokens.accessToken != result.tokens.accessToken)
    }

    @Test("wrong password and unknown user give the same invalid_credentials")
    func wrongCredentials() async {
        let provider = makeProvider()
        let wrong = await error { () async throws(AuthGateError) in try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("nope"))) }
        let unknown = await error { () async throws(AuthGateError) in
            try await provider.signIn(PasswordCredentials(username: "ghost", password: Secret("demo-password-1")))
        }
        #expect(wrong?.reason == .invalidCredentials)
        #expect(unknown?.reason == .invalidCredentials)
        #expect(wrong?.message == unknown?.message)
    }

    @Test("empty fields are validation_failed, naming each field")
    func emptyFields() async {
        let provider = makeProvider()
        let failure = await error { () async throws(AuthGateError) in try await provider.signIn(PasswordCredentials(username: " ", password: Secret(""))) }
        #expect(failure?.reason == .validationFailed)
        #expect(failure?.fields.map(\.field) == ["username", "password"])
    }

    @Test("refresh rotates the refresh token; the spent one is refused")
    func refreshRotation() async throws {
        let provider = makeProvider()
        let first = try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("demo-password-1"))).tokens
        let refreshed = try await provider.refresh(try #require(first.refreshToken), variant: TokenVariant())
        #expect(refreshed.accessToken != first.accessToken)
        #expect(refreshed.refreshToken != first.refreshToken)
        let replay = await error { () async throws(AuthGateError) in try await provider.refresh(first.refreshToken!, variant: TokenVariant()) }
        #expect(replay?.reason == .loginRequired)
        #expect(await provider.liveRefreshTokenCount == 1)
    }

    @Test("an expired refresh token is refused with login_required")
    func expiredRefreshToken() async throws {
        let clock = TestClock()
        let provider = makeProvider(clock: clock)
        let tokens = try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("demo-password-1"))).tokens
        clock.advance(by: 601)
        let failure = await error { () async throws(AuthGateError) in try await provider.refresh(tokens.refreshToken!, variant: TokenVariant()) }
        #expect(failure?.reason == .loginRequired)
    }

    @Test("revocation kills the refresh token")
    func revoke() async throws {
        let provider = makeProvider()
        let tokens = try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("demo-password-1"))).tokens
        await provider.revoke(tokens)
        #expect(await provider.liveRefreshTokenCount == 0)
        let failure = await error { () async throws(AuthGateError) in try await provider.refresh(tokens.refreshToken!, variant: TokenVariant()) }
        #expect(failure?.reason == .loginRequired)
    }

    @Test("registration signs the new user in, and the user can sign in again")
    func register() async throws {
        let provider = makeProvider()
        let result = try await provider.register(
            Registration(
                username: "bob",
                email: "bob@example.com",
                password: Secret("correct-horse-9"),
                passwordConfirmation: Secret("correct-horse-9")
            )
        )
        #expect(result.subject == "mock:bob")
        let again = try await provider.signIn(PasswordCredentials(username: "bob", password: Secret("correct-horse-9")))
        #expect(again.subject == "mock:bob")
    }

    static let badRegistrations: [(username: String, email: String, password: String, confirmation: String, reason: ErrorReason, fields: [String])] = [
        ("", "", "", "", .validationFailed, ["username", "email", "password"]),
        ("bob smith", "bob@example.com", "correct-horse-9", "correct-horse-9", .validationFailed, ["username"]),
        ("bob", "bob.example.com", "correct-horse-9", "correct-horse-9", .validationFailed, ["email"]),
        ("bob", "bob@example", "correct-horse-9", "correct-horse-9", .validationFailed, ["email"]),
        ("bob", "bob@example.com", "correct-horse-9", "correct-horse-8", .validationFailed, ["password_confirmation"]),
        ("bob", "bob@example.com", "short1", "short1", .weakPassword, ["password"]),
        ("bob", "bob@example.com", "onlyletters", "onlyletters", .weakPassword, ["password"]),
        ("bobby", "bob@example.com", "xxbobby12345", "xxbobby12345", .weakPassword, ["password"]),
        ("DEMO", "demo2@example.com", "correct-horse-9", "correct-horse-9", .userExists, ["username"]),
    ]

    @Test("bad registrations are refused with their reason and fields", arguments: badRegistrations)
    func badRegistration(_ case: (username: String, email: String, password: String, confirmation: String, reason: ErrorReason, fields: [String])) async {
        let provider = makeProvider()
        let failure = await error { () async throws(AuthGateError) in
            try await provider.register(
                Registration(
                    username: `case`.username,
                    email: `case`.email,
                    password: Secret(`case`.password),
                    passwordConfirmation: Secret(`case`.confirmation)
                )
            )
        }
        #expect(failure?.reason == `case`.reason)
        #expect(failure?.fields.map(\.field) == `case`.fields)
        #expect(failure?.message.contains(`case`.password) != true || `case`.password.isEmpty)
    }

    @Test("registration can be switched off")
    func registrationDisabled() async {
        let provider = makeProvider(allowRegistration: false)
        let failure = await error { () async throws(AuthGateError) in
            try await provider.register(
                Registration(username: "bob", email: "bob@example.com", password: Secret("correct-horse-9"), passwordConfirmation: Secret("correct-horse-9"))
            )
        }
        #expect(failure?.reason == .unsupportedGrant)
    }

    @Test("latency is simulated within latency_ms")
    func latency() async throws {
        let provider = makeProvider(latency: 40...60)
        let start = ContinuousClock.now
        _ = try await provider.signIn(PasswordCredentials(username: "demo", password: Secret("demo-password-1")))
        #expect(ContinuousClock.now - start >= .milliseconds(40))
    }
}

@Suite("Small domain types")
struct DomainTypeTests {
    @Test("secrets never print themselves")
    func secretRedaction() {
        let secret = Secret("hunter2-token")
        #expect("\(secret)" == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        #expect(!"\(PasswordCredentials(username: "u", password: secret))".contains("hunter2"))
        #expect(secret.constantTimeEquals("hunter2-token"))
        #expect(!secret.constantTimeEquals("hunter2-tokeN"))
        #expect(!secret.constantTimeEquals("hunter2"))
    }

    @Test("base64url without padding (RFC 4648 test vectors)")
    func base64url() {
        #expect(Base64URL.encode(Array("f".utf8)) == "Zg")
        #expect(Base64URL.encode(Array("fo".utf8)) == "Zm8")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }

    @Test(
        "provider ids",
        arguments: [
            ("corp", true), ("corp-2_x", true), ("9lives", true), ("Corp", false), ("_x", false), ("a.b", false), (String(repeating: "a", count: 65), false),
        ]
    )
    func providerID(_ value: String, _ valid: Bool) {
        #expect((ProviderID(value) != nil) == valid)
    }

    @Test(
        "email plausibility",
        arguments: [
            ("a@b.co", true), ("first.last+tag@sub.example.org", true), ("a@b", false), ("@b.co", false), ("a b@c.de", false), ("a@@b.co", false),
            ("a@-b.co", false),
        ]
    )
    func email(_ value: String, _ valid: Bool) {
        #expect(EmailAddress.isPlausible(value) == valid)
    }

    @Test("the default password policy")
    func passwordPolicy() {
        let policy = PasswordPolicy()
        #expect(policy.violations(of: "correct-horse-9", username: "bob").isEmpty)
        #expect(policy.violations(of: "abc1", username: "bob") == ["must be at least 10 characters long"])
        #expect(policy.violations(of: "12345678901", username: "bob") == ["must contain a letter"])
        #expect(policy.violations(of: "my-bob-password-1", username: "bob") == ["must not contain the username"])
    }
}
