import AuthGateCore

/// Refreshing an access token (RFC 6749 §6), for the session itself or for a narrower
/// variant: fewer scopes (§6 `scope`) or one resource server (RFC 8707 §2.2 `resource`).
enum RefreshGrant {
    static func fields(_ refreshToken: Secret, variant: TokenVariant) -> [(String, String)] {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken.exposedValue)]
        // No `scope` for the session's own token: the server then grants the original scopes.
        if !variant.scopes.isEmpty { fields.append(("scope", variant.scopes.joined(separator: " "))) }
        if let resource = variant.resource { fields.append(("resource", resource)) }
        return fields
    }
}
