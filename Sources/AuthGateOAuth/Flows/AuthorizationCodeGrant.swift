public import AuthGateCore
import Crypto
public import FoundationEssentials

/// One authorization request of the authorization-code grant (RFC 6749 §4.1) with PKCE
/// (RFC 7636, S256), `state`, the OpenID Connect `nonce`, and what the redirect must carry.
///
/// Everything that proves the response belongs to this request stays in the daemon; only
/// ``url`` goes to the user's browser.
public struct AuthorizationRequest: Sendable {
    /// The URL to open in the browser.
    public var url: URL
    /// Where the provider sends the browser back: our loopback listener (RFC 8252 §7.3).
    public var redirectURI: URL
    /// `state` (RFC 6749 §10.12): the redirect must bring it back unchanged.
    public var state: Secret
    /// `nonce` (OpenID Connect Core §3.1.2.1): the ID token must carry it.
    public var nonce: Secret?
    /// `code_verifier` (RFC 7636 §4.1): sent only with the code, to the token endpoint.
    public var codeVerifier: Secret
    /// The scopes asked for.
    public var scopes: [String]
    /// The issuer the redirect's `iss` must name (RFC 9207 §2.4), when there is one.
    public var issuer: String?
    /// The provider advertises `authorization_response_iss_parameter_supported`: a redirect
    /// without `iss` is refused (RFC 9207 §2.4).
    public var requiresIssuer: Bool
}

enum AuthorizationCodeGrant {
    /// Builds the request: fresh `state`, `nonce` and verifier for every sign-in.
    /// - Parameter prompt: OpenID Connect `prompt`, e.g. `create` for registration.
    static func request(endpoint: URL, clientID: String, redirectURI: URL, scopes: [String], prompt: String?,
                        audience: String?, issuer: String?, requiresIssuer: Bool) -> AuthorizationRequest {
        let state = Secret.random(bytes: 24)
        let verifier = Secret.random(bytes: 32)  // 43 characters: RFC 7636 §4.1 wants 43 to 128
        let nonce = scopes.contains("openid") ? Secret.random(bytes: 24) : nil
        var fields: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI.absoluteString),
            ("state", state.exposedValue), ("code_challenge", codeChallenge(verifier)), ("code_challenge_method", "S256"),
        ]
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let nonce { fields.append(("nonce", nonce.exposedValue)) }
        if let prompt { fields.append(("prompt", prompt)) }
        if let audience { fields.append(("audience", audience)) }
        // The endpoint may carry a query of its own (OpenID Connect Core §3.1.2.1 allows it): keep it.
        var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)!
        let ours = String(decoding: FormEncoding.encode(fields), as: UTF8.self)
        components.percentEncodedQuery = [components.percentEncodedQuery, ours].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: "&")
        return AuthorizationRequest(url: components.url!, redirectURI: redirectURI, state: state, nonce: nonce, codeVerifier: verifier,
                                    scopes: scopes, issuer: issuer, requiresIssuer: requiresIssuer)
    }

    /// `BASE64URL(SHA256(ASCII(code_verifier)))` (RFC 7636 §4.2).
    static func codeChallenge(_ verifier: Secret) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.exposedValue.utf8))))
    }

    /// The token request that redeems the code (RFC 6749 §4.1.3, RFC 7636 §4.5).
    static func tokenFields(code: Secret, request: AuthorizationRequest) -> [(String, String)] {
        [("grant_type", "authorization_code"), ("code", code.exposedValue), ("redirect_uri", request.redirectURI.absoluteString),
         ("code_verifier", request.codeVerifier.exposedValue)]
    }
}

extension AuthorizationRequest {
    /// True when `parameters` carry this request's `state`, compared in constant time.
    public func carriesState(_ parameters: [String: String]) -> Bool {
        parameters["state"].map(state.constantTimeEquals) ?? false
    }
}
