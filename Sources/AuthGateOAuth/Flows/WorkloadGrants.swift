import AuthGateCore
import FoundationEssentials

/// The JWT bearer grant (RFC 7523 §2.1): a JWT is the authorization grant. Its `assertion` is
/// the platform's JWT (`assertion_file`, sent through ``WorkloadField``) or one the daemon signs
/// with `assertion_key_file` (``signedAssertion(key:settings:clientID:tokenEndpoint:scopes:now:)``).
enum JWTBearerGrant {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// How long an assertion the daemon signs is valid: Google accepts at most an hour; five
    /// minutes covers a slow provider and a skewed clock.
    static let assertionLifetime = 300

    static func fields(scopes: [String], audience: String?, resource: String?) -> [(String, String)] {
        var fields = [("grant_type", grantType)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        if let resource { fields.append(("resource", resource)) }
        return fields
    }

    /// RFC 7523 §3: `iss` (the file's `assertion_issuer`, else the client), `sub` (its
    /// `assertion_subject`, else the issuer), `aud` (its `assertion_audience`, else the token
    /// endpoint), `iat`, `exp`, a fresh `jti`; and `scope`, which Google's service accounts read
    /// from the assertion rather than the request.
    static func signedAssertion(
        key: ClientSigningKey,
        settings: WorkloadIdentity.AssertionKey,
        clientID: String,
        tokenEndpoint: URL,
        scopes: [String],
        now: Date
    ) -> String {
        let issuer = settings.issuer ?? clientID
        let issuedAt = Int(now.timeIntervalSince1970)
        return key.sign(
            AssertionClaims(
                iss: issuer,
                sub: settings.subject ?? issuer,
                aud: settings.audience ?? tokenEndpoint.absoluteString,
                jti: uniqueTokenIdentifier(),
                iat: issuedAt,
                exp: issuedAt + assertionLifetime,
                scope: scopes.isEmpty ? nil : scopes.joined(separator: " ")
            )
        )
    }
}

extension TokenExchangeGrant {
    /// Token exchange as a service's sign-in (RFC 8693 §2.1): the platform's token (from
    /// `subject_token_file`, sent through ``WorkloadField``) of the file's `subject_token_type`,
    /// for an access token (`requested_token_type`, which Google's STS requires).
    static func signInFields(subjectTokenType: String, scopes: [String], audience: String?, resource: String?) -> [(String, String)] {
        var fields = [("grant_type", grantType), ("subject_token_type", subjectTokenType), ("requested_token_type", accessTokenType)]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        if let resource { fields.append(("resource", resource)) }
        return fields
    }
}
