import AuthGateCore

/// Resource owner password credentials (RFC 6749 §4.3). Deprecated by RFC 9700 §2.4; used
/// only with providers whose file lists it.
enum PasswordGrant {
    static func fields(_ credentials: PasswordCredentials, scopes: [String], audience: String?) -> [(String, String)] {
        var fields = [("grant_type", "password"), ("username", credentials.username), ("password", credentials.password.exposedValue)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        return fields
    }
}
