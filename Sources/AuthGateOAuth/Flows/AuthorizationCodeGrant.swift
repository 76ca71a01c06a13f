public import AuthGateCore
import Crypto
import FoundationEssentials

enum AuthorizationCodeGrant {
    /// Builds the request: fresh `state`, `nonce` and verifier for every sign-in.
    /// - Parameter prompt: OpenID Connect `prompt`, e.g. `create` for registration.
    /// - Parameter extra: The file's `authorization_parameters`; a `prompt` of the caller's wins.
    /// - Returns: The request, whose `url` carries the parameters, and the parameters themselves
    ///   (for a pushed request, RFC 9126).
    static func request(
        endpoint: URL,
        clientID: String,
        redirectURI: URL,
        scopes: [String],
        prompt: String?,
        audience: String?,
        extra: [ProviderQuirks.AuthorizationParameter] = [],
        issuer: String?,
        requiresIssuer: Bool,
        proofKey: DPoPKey?
    ) -> (request: AuthorizationRequest, parameters: [(String, String)]) {
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
        for parameter in extra where !fields.contains(where: { $0.0 == parameter.name }) {
            fields.append((parameter.name, parameter.value))
        }
        // RFC 9449 §10: the code can only be redeemed with a proof of this key.
        if let proofKey { fields.append(("dpop_jkt", proofKey.thumbprint)) }
        var request = AuthorizationRequest(
            url: url(endpoint, fields),
            redirectURI: redirectURI,
            state: state,
            nonce: nonce,
            codeVerifier: verifier,
            scopes: scopes,
            issuer: issuer,
            requiresIssuer: requiresIssuer
        )
        request.proofKey = proofKey
        return (request, fields)
    }

    /// The authorization endpoint with `fields` in its query. The endpoint may carry a query
    /// of its own (OpenID Connect Core §3.1.2.1 allows it): it is kept.
    static func url(_ endpoint: URL, _ fields: [(String, String)]) -> URL {
        var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)!
        let ours = String(decoding: FormEncoding.encode(fields), as: UTF8.self)
        components.percentEncodedQuery = [components.percentEncodedQuery, ours].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: "&")
        return components.url!
    }

    /// `BASE64URL(SHA256(ASCII(code_verifier)))` (RFC 7636 §4.2).
    static func codeChallenge(_ verifier: Secret) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.exposedValue.utf8))))
    }

    /// The token request that redeems the code (RFC 6749 §4.1.3, RFC 7636 §4.5).
    static func tokenFields(code: Secret, request: AuthorizationRequest) -> [(String, String)] {
        [
            ("grant_type", "authorization_code"), ("code", code.exposedValue), ("redirect_uri", request.redirectURI.absoluteString),
            ("code_verifier", request.codeVerifier.exposedValue),
        ]
    }
}

extension AuthorizationRequest {
    /// True when `parameters` carry this request's `state`, compared in constant time.
    public func carriesState(_ parameters: [String: String]) -> Bool {
        parameters["state"].map(state.constantTimeEquals) ?? false
    }
}
