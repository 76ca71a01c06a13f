import AuthGateCore

/// Token exchange (RFC 8693): the session's access token buys a token for another audience or
/// resource, or with fewer scopes.
enum TokenExchangeGrant {
    static let grantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    /// The request (§2.1).
    static func fields(subject: Secret, variant: TokenVariant) -> [(String, String)] {
        var fields = [("grant_type", grantType), ("subject_token", subject.exposedValue), ("subject_token_type", accessTokenType)]
        if let audience = variant.exchange?.audience { fields.append(("audience", audience)) }
        if let resource = variant.resource { fields.append(("resource", resource)) }
        if !variant.scopes.isEmpty { fields.append(("scope", variant.scopes.joined(separator: " "))) }
        if let type = variant.exchange?.requestedTokenType { fields.append(("requested_token_type", type)) }
        return fields
    }

    /// §2.2.1: `issued_token_type` is required in a successful answer.
    static func issuedTokenType(_ tokens: TokenSet, provider: String) throws(AuthGateError) -> String {
        guard let type = tokens.issuedTokenType, type.contains(":"), type.utf8.count <= 256, !type.containsControlCharacters else {
            throw ProviderFailure.malformed(provider, what: "token exchange response", "issued_token_type is missing or not a token type URI")
        }
        // Whatever was asked for: a refresh token in the access_token field would outlive the
        // session's logout and a narrowed `access` in a program's hands.
        guard TokenExchangePolicy.issuableTypes.contains(type) else {
            throw ProviderFailure.malformed(
                provider,
                what: "token exchange response",
                "it issued a token of type \(type.prefix(100)), and authgated hands out only access tokens, JWTs and ID tokens"
            )
        }
        return type
    }
}
