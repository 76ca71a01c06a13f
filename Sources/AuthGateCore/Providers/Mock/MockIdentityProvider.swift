public import FoundationEssentials

/// The built-in `mock` provider: in-memory users, registration, simulated latency, opaque
/// random tokens, and the same error reasons as a real provider.
///
/// It lets anyone try the whole daemon with no identity provider at all. Users registered at
/// run time live in memory only and are gone when the daemon stops, like its tokens.
public actor MockIdentityProvider: IdentityProvider {
    private struct Account {
        var username: String
        var password: Secret
        var email: String?
        var displayName: String?
        var subject: String
    }

    // What it issued, one record per live token: an account's number and an expiry to the
    // second in 4 bytes each, so that a table of 100,000 sessions' tokens (262,144 buckets)
    // costs 24 and 32 bytes a bucket where a name and a Date took 40 and 48
    // (docs/BENCHMARKS.md, "Bytes per session").
    private struct IssuedRefreshToken {
        var account: UInt32
        var expiry: Expiry
        var scopes: [String]
    }

    private struct IssuedAccessToken {
        var account: UInt32
        var expiry: Expiry
    }

    /// An instant as whole seconds after ``MockIdentityProvider/epoch``, rounded up: a token is
    /// live before it, so one is never refused early (at most a second late).
    private struct Expiry {
        var seconds: UInt32
    }

    private let settings: MockProviderSettings
    private let defaultScopes: [String]
    private let now: @Sendable () -> Date
    /// By number, the number found by the lowercased username: user names are
    /// case-insensitive, as at most providers.
    private var accounts: [Account] = []
    private var accountNumbers: [String: UInt32] = [:]
    /// 2^31 s (68 years) before the provider started: expiries are counted from here.
    private let epoch: Date
    /// Keyed by the refresh token's value.
    private var refreshTokens: [String: IssuedRefreshToken] = [:]
    /// Each live access token, for `userinfo`; expired ones are pruned as new ones are issued.
    private var accessTokens: [String: IssuedAccessToken] = [:]
    private var accessTokensAtLastPrune = 0

    /// - Parameters:
    ///   - settings: The provider's file.
    ///   - defaultScopes: Scopes granted when a sign-in names none.
    ///   - now: The clock tokens are dated by; injected by tests.
    public init(settings: MockProviderSettings, defaultScopes: [String] = [], now: @escaping @Sendable () -> Date = { Date() }) {
        self.settings = settings
        self.defaultScopes = defaultScopes
        self.now = now
        epoch = now().addingTimeInterval(-Double(1 << 31))
        for user in settings.users {
            let key = user.username.lowercased()
            let account = Account(
                username: user.username,
                password: user.password,
                email: user.email,
                displayName: user.displayName,
                subject: "mock:" + key
            )
            // A later user of the same name replaces an earlier one, as in a dictionary.
            if let number = accountNumbers[key] {
                accounts[Int(number)] = account
            } else {
                accountNumbers[key] = UInt32(accounts.count)
                accounts.append(account)
            }
        }
    }

    private func expiry(_ date: Date) -> Expiry {
        Expiry(seconds: UInt32(clamping: Int64(date.timeIntervalSince(epoch).rounded(.up))))
    }

    private func isLive(_ expiry: Expiry) -> Bool {
        Double(expiry.seconds) > now().timeIntervalSince(epoch)
    }

    public func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult {
        try credentials.validate()
        await simulateLatency()
        let key = credentials.username.lowercased()
        // Compare against a dummy when the user is unknown, so both failures take the same time.
        let number = accountNumbers[key]
        let account = number.map { accounts[Int($0)] }
        let expected = account?.password ?? Secret("\u{0}unknown-user")
        guard expected.constantTimeEquals(credentials.password.exposedValue), let account, let number else {
            throw AuthGateError(.invalidCredentials, "The username or password is incorrect.")
        }
        return SignInResult(tokens: issueTokens(for: number, scopes: credentials.scopes), subject: account.subject)
    }

    public func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult {
        var fields: [FieldError] = []
        let username = registration.username.trimming(while: \.isWhitespace)
        if username.isEmpty {
            fields.append(FieldError(field: "username", message: "must not be empty"))
        } else if username.count > 64 || !username.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) {
            fields.append(FieldError(field: "username", message: "may use only letters, digits, '.', '_' and '-' (at most 64)"))
        }
        if registration.email.isEmpty {
            fields.append(FieldError(field: "email", message: "must not be empty"))
        } else if !EmailAddress.isPlausible(registration.email) {
            fields.append(FieldError(field: "email", message: "must be an email address like name@example.com"))
        }
        if registration.password.exposedValue.isEmpty {
            fields.append(FieldError(field: "password", message: "must not be empty"))
        }
        if registration.passwordConfirmation.exposedValue != registration.password.exposedValue {
            fields.append(FieldError(field: "password_confirmation", message: "does not match the password"))
        }
        guard fields.isEmpty else { throw .validationFailed(fields) }
        guard settings.allowRegistration else {
            throw AuthGateError(.unsupportedGrant, "This provider does not allow registration.")
        }
        let weaknesses = settings.passwordPolicy.violations(of: registration.password.exposedValue, username: username)
        guard weaknesses.isEmpty else {
            throw AuthGateError(
                .weakPassword,
                "The password is too weak: it \(weaknesses.joined(separator: ", ")).",
                fields: weaknesses.map { FieldError(field: "password", message: $0) }
            )
        }
        await simulateLatency()
        let key = username.lowercased()
        guard accountNumbers[key] == nil else {
            throw AuthGateError(
                .userExists,
                "The username '\(username)' is already taken.",
                fields: [FieldError(field: "username", message: "is already taken")]
            )
        }
        let number = UInt32(accounts.count)
        accounts.append(Account(username: username, password: registration.password, email: registration.email, displayName: nil, subject: "mock:" + key))
        accountNumbers[key] = number
        return SignInResult(tokens: issueTokens(for: number, scopes: []), subject: "mock:" + key)
    }

    public func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        await simulateLatency()
        guard let issued = refreshTokens[refreshToken.exposedValue], isLive(issued.expiry) else {
            throw AuthGateError(.loginRequired, "The provider no longer accepts this session; sign in again.")
        }
        // RFC 6749 §6: a refresh may narrow the scopes, never widen them (`invalid_scope`).
        guard Set(variant.scopes).isSubset(of: issued.scopes) else {
            throw AuthGateError(
                .validationFailed,
                "The mock provider refused the requested scopes: they exceed the session's.",
                fields: [FieldError(field: "scopes", message: "refused by the provider")]
            )
        }
        // Rotation (RFC 9700 §4.14.2): the old refresh token is spent, a new one replaces it.
        // Access tokens already issued stay valid until they expire, as with most servers.
        refreshTokens[refreshToken.exposedValue] = nil
        let sessionScopes = issued.scopes
        var tokens = issueTokens(for: issued.account, scopes: sessionScopes)
        if !variant.isEmpty {
            // The narrower token is a separate access token; the rotated refresh token keeps
            // the session's full scopes.
            let narrow = Secret.random(prefix: "mock_at_")
            accessTokens[narrow.exposedValue] = IssuedAccessToken(account: issued.account, expiry: expiry(tokens.expiresAt))
            tokens.accessToken = narrow
            tokens.scopes = variant.scopes.isEmpty ? sessionScopes : variant.scopes
        }
        return tokens
    }

    public func revokeReporting(_ tokens: TokenSet) async -> RevocationOutcome {
        await revoke(tokens)
        return .revoked
    }

    public func revoke(_ tokens: TokenSet) async {
        if let refreshToken = tokens.refreshToken {
            refreshTokens[refreshToken.exposedValue] = nil
        }
        accessTokens[tokens.accessToken.exposedValue] = nil
    }

    public func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult {
        throw AuthGateError(.unsupportedGrant, "The mock provider signs in users, not clients.")
    }

    public func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] {
        await simulateLatency()
        guard let issued = accessTokens[tokens.accessToken.exposedValue], isLive(issued.expiry) else {
            throw AuthGateError(.loginRequired, "The provider no longer accepts this access token; sign in again.")
        }
        let account = accounts[Int(issued.account)]
        var claims: [String: JSONValue] = ["sub": .string(account.subject), "preferred_username": .string(account.username)]
        if let email = account.email { claims["email"] = .string(email) }
        if let name = account.displayName { claims["name"] = .string(name) }
        return claims
    }

    /// How many refresh tokens are live; lets tests see rotation and revocation.
    public var liveRefreshTokenCount: Int { refreshTokens.count }

    private func issueTokens(for account: UInt32, scopes: [String]) -> TokenSet {
        let issuedAt = now()
        let granted = scopes.isEmpty ? defaultScopes : scopes
        let refreshToken = Secret.random(prefix: "mock_rt_")
        let accessToken = Secret.random(prefix: "mock_at_")
        let refreshExpiry = issuedAt.addingTimeInterval(TimeInterval(settings.refreshTokenLifetimeSeconds))
        let accessExpiry = issuedAt.addingTimeInterval(TimeInterval(settings.accessTokenLifetimeSeconds))
        refreshTokens[refreshToken.exposedValue] = IssuedRefreshToken(account: account, expiry: expiry(refreshExpiry), scopes: granted)
        accessTokens[accessToken.exposedValue] = IssuedAccessToken(account: account, expiry: expiry(accessExpiry))
        // Amortised pruning: a sweep each time the table has doubled keeps it proportional to
        // the live tokens however long the daemon runs.
        if accessTokens.count > max(1024, 2 * accessTokensAtLastPrune) {
            let issued = issuedAt.timeIntervalSince(epoch)
            accessTokens = accessTokens.filter { Double($0.value.expiry.seconds) > issued }
            accessTokensAtLastPrune = accessTokens.count
        }
        return TokenSet(
            accessToken: accessToken,
            tokenType: "Bearer",
            expiresAt: accessExpiry,
            refreshToken: refreshToken,
            refreshTokenExpiresAt: refreshExpiry,
            scopes: granted
        )
    }

    /// Waits a random time in `latency_ms`, as a real provider's round trip would take.
    private func simulateLatency() async {
        let range = settings.latencyMilliseconds
        guard range.upperBound > 0 else { return }
        try? await Task.sleep(for: .milliseconds(Int.random(in: range)))
    }
}
