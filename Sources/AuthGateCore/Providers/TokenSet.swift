public import FoundationEssentials

/// The tokens of one session, as the provider issued them (RFC 6749 §5.1).
public struct TokenSet: Sendable, Hashable {
    public var accessToken: Secret
    /// `token_type`, usually `Bearer`.
    public var tokenType: String
    public var expiresAt: Date
    public var refreshToken: Secret?
    /// When the refresh token stops working, where the provider says so.
    public var refreshTokenExpiresAt: Date?
    public var idToken: Secret?
    /// The granted scopes (RFC 6749 §5.1 `scope`), which may differ from those requested.
    public var scopes: [String]
    /// The key the tokens are bound to (DPoP, RFC 9449; `token_type` `DPoP`): the session's,
    /// kept across refreshes.
    public var proofKey: DPoPKey?
    /// What only some tokens carry, allocated only then: every session's record holds a token
    /// set, and these two were 32 bytes of nothing in nearly all (docs/BENCHMARKS.md, "Bytes
    /// per session"). `nil` whenever both are.
    private var rare: Rare?

    /// The `sub` of the ID token that came with these tokens, once verified; a refresh's must
    /// be the session's (OIDC Core §12.2). Not stored: it only travels from the provider.
    public var idTokenSubject: String? {
        get { rare?.idTokenSubject }
        set { rare = Rare.unlessEmpty(idTokenSubject: newValue, issuedTokenType: issuedTokenType) }
    }
    /// RFC 8693 `issued_token_type` of an exchanged token.
    public var issuedTokenType: String? {
        get { rare?.issuedTokenType }
        set { rare = Rare.unlessEmpty(idTokenSubject: idTokenSubject, issuedTokenType: newValue) }
    }

    /// Never changed in place: a copy of the token set keeps its own.
    private final class Rare: Sendable, Hashable {
        let idTokenSubject: String?
        let issuedTokenType: String?

        private init(idTokenSubject: String?, issuedTokenType: String?) {
            self.idTokenSubject = idTokenSubject
            self.issuedTokenType = issuedTokenType
        }

        static func unlessEmpty(idTokenSubject: String?, issuedTokenType: String?) -> Rare? {
            idTokenSubject == nil && issuedTokenType == nil ? nil : Rare(idTokenSubject: idTokenSubject, issuedTokenType: issuedTokenType)
        }

        static func == (lhs: Rare, rhs: Rare) -> Bool {
            lhs.idTokenSubject == rhs.idTokenSubject && lhs.issuedTokenType == rhs.issuedTokenType
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(idTokenSubject)
            hasher.combine(issuedTokenType)
        }
    }

    public init(
        accessToken: Secret,
        tokenType: String = "Bearer",
        expiresAt: Date,
        refreshToken: Secret? = nil,
        refreshTokenExpiresAt: Date? = nil,
        idToken: Secret? = nil,
        scopes: [String] = [],
        proofKey: DPoPKey? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
        self.idToken = idToken
        self.scopes = scopes
        self.proofKey = proofKey
    }

    /// True when the access token stays valid for more than `seconds` after `now`: at its
    /// expiry instant a token is expired.
    public func isValid(for seconds: TimeInterval, at now: Date) -> Bool {
        expiresAt.timeIntervalSince(now) > seconds
    }
}

/// A successful sign-in: the tokens and who they belong to.
public struct SignInResult: Sendable {
    public var tokens: TokenSet
    /// The user's stable identifier at the provider (`sub`).
    public var subject: String?
    /// The name the user knows, where the provider says one (`preferred_username`, else
    /// `email`, else `name`): subjects are often opaque ("1", a UUID).
    public var displayName: String?

    public init(tokens: TokenSet, subject: String?, displayName: String? = nil) {
        self.tokens = tokens
        self.subject = subject
        self.displayName = displayName
    }

    /// The first of the three that is a short printable string.
    public static func displayName(preferredUsername: String?, email: String?, name: String?) -> String? {
        [preferredUsername, email, name].lazy.compactMap { $0 }
            .first { !$0.isEmpty && $0.count <= 256 && !$0.containsControlCharacters }
    }
}
