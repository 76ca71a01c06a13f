/// Client credentials (RFC 6749 §4.4): the client acts for itself. There is no refresh token
/// (§4.4.3); the session re-acquires instead.
enum ClientCredentialsGrant {
    static func fields(scopes: [String], audience: String?, resource: String?) -> [(String, String)] {
        var fields = [("grant_type", "client_credentials")]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        // RFC 8707 §2.1: the resource the token is meant for.
        if let resource { fields.append(("resource", resource)) }
        return fields
    }
}
