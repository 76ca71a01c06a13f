import AuthGateCore

/// Token revocation (RFC 7009 §2.1): the refresh token, whose revocation also ends the access
/// tokens issued with it, or else the access token.
enum Revocation {
    static func fields(_ tokens: TokenSet) -> [(String, String)] {
        if let refreshToken = tokens.refreshToken {
            return [("token", refreshToken.exposedValue), ("token_type_hint", "refresh_token")]
        }
        return [("token", tokens.accessToken.exposedValue), ("token_type_hint", "access_token")]
    }
}
