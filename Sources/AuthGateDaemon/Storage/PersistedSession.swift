import AuthGateCore
import FoundationEssentials

/// One persistent session as stored on disk: the session's identity, the provider
/// configuration it was obtained under, and its tokens.
///
/// The tokens are plain strings here because this type exists to be encoded; it prints them
/// as `<redacted>` all the same.
struct PersistedSession: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    var provider: String
    var session: String
    var grant: Grant
    var subject: String?
    /// The name the user knows, as the provider said it at sign-in; absent in files written
    /// before it was kept, and when the provider said none.
    var displayName: String?
    /// The provider configuration's issuer when the session was saved, so the daemon can drop
    /// sessions whose provider has since changed.
    var issuer: String?
    /// The provider configuration's client ID when the session was saved (see `issuer`).
    var clientID: String?
    var accessToken: String
    var tokenType: String
    var expiresAt: Date
    var refreshToken: String?
    var refreshTokenExpiresAt: Date?
    var idToken: String?
    var scopes: [String]
    /// The private scalar of the session's DPoP key, base64url; inside the sealed file only.
    var dpopKey: String?
    var savedAt: Date
    /// The user chose consent at sign-in (``SessionRecord/asksConsent``); absent when not.
    var asksConsent: Bool?

    init(
        provider: String,
        session: String,
        grant: Grant,
        subject: String?,
        displayName: String? = nil,
        issuer: String?,
        clientID: String?,
        tokens: TokenSet,
        savedAt: Date,
        asksConsent: Bool? = nil
    ) {
        self.provider = provider
        self.session = session
        self.grant = grant
        self.subject = subject
        self.displayName = displayName
        self.issuer = issuer
        self.clientID = clientID
        self.accessToken = tokens.accessToken.exposedValue
        self.tokenType = tokens.tokenType
        self.expiresAt = tokens.expiresAt
        self.refreshToken = tokens.refreshToken?.exposedValue
        self.refreshTokenExpiresAt = tokens.refreshTokenExpiresAt
        self.idToken = tokens.idToken?.exposedValue
        self.scopes = tokens.scopes
        self.dpopKey = tokens.proofKey.map { Base64URL.encode($0.storageRepresentation) }
        self.savedAt = savedAt
        self.asksConsent = asksConsent
    }

    /// The tokens, as the rest of the daemon holds them; `nil` when the stored DPoP key is
    /// not one (the tokens bound to it could not be used).
    var tokens: TokenSet? {
        var proofKey: DPoPKey?
        if let dpopKey {
            guard let bytes = Base64URL.decode(dpopKey), let key = try? DPoPKey(storageRepresentation: bytes) else { return nil }
            proofKey = key
        }
        return TokenSet(
            accessToken: Secret(accessToken),
            tokenType: tokenType,
            expiresAt: expiresAt,
            refreshToken: refreshToken.map(Secret.init),
            refreshTokenExpiresAt: refreshTokenExpiresAt,
            idToken: idToken.map(Secret.init),
            scopes: scopes,
            proofKey: proofKey
        )
    }

    var description: String {
        "PersistedSession(provider: \(provider), session: \(session), grant: \(grant.rawValue), expiresAt: \(expiresAt), tokens: <redacted>)"
    }

    var debugDescription: String { description }

    enum CodingKeys: String, CodingKey {
        case provider
        case session
        case grant
        case subject
        case displayName = "display_name"
        case issuer
        case clientID = "client_id"
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case refreshToken = "refresh_token"
        case refreshTokenExpiresAt = "refresh_token_expires_at"
        case idToken = "id_token"
        case scopes
        case dpopKey = "dpop_key"
        case savedAt = "saved_at"
        case asksConsent = "asks_consent"
    }
}
