import AuthGateCore

/// Refreshing an access token (RFC 6749 §6).
enum RefreshGrant {
    static func fields(_ refreshToken: Secret, scopes: [String]) -> [(String, String)] {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken.exposedValue)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        return fields
    }
}
