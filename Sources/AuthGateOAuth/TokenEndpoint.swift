import AuthGateCore
import AuthGateHTTP
import FoundationEssentials

/// What a token request is for; decides how a refusal reads to the user.
enum TokenPurpose: Sendable, Equatable {
    case passwordSignIn
    case clientSignIn
    case refresh
    /// Redeeming what an interactive sign-in produced: an authorization code or a device code.
    case interactiveSignIn
    /// Exchanging the session's token for another (RFC 8693).
    case exchange
    /// A service signing in with its platform's token (`jwt_bearer`, `token_exchange`).
    case workloadSignIn(WorkloadTokenFile?)
}

/// A form field whose value is a platform token, read from its file when the request is sent:
/// the `assertion` of the JWT bearer grant, the `subject_token` of an exchange.
struct WorkloadField: Sendable {
    let name: String
    let file: WorkloadTokenFile
}

/// The client side of a token endpoint: client authentication (``ClientAuthenticator``), DPoP
/// proofs with the server's nonce (RFC 9449), the request, and the reading of its answer, strictly.
struct TokenEndpoint: Sendable {
    let provider: String
    let client: ClientAuthenticator
    let transport: any HTTPTransport
    let policy: HTTPRequestPolicy
    /// The provider's latest `DPoP-Nonce` (RFC 9449 §8), sent with every later proof.
    let nonce = DPoPNonce()
    /// How the provider's answers depart from RFC 6749 (`expires_in_default`,
    /// `token_errors_with_http_200`).
    var quirks = ProviderQuirks()

    var clientID: String { client.clientID }

    /// A form POST with this client's authentication and, for a session bound to `proofKey`,
    /// a DPoP proof. A server that asks for a nonce (`use_dpop_nonce`, RFC 9449 §8) gets the
    /// request once more with it; a second demand is the server's answer. Platform tokens
    /// (`client_assertion_file`, `workload`) are read from their files for this request; when
    /// the provider refuses the client or the grant and a file has changed meanwhile (kubelet
    /// rotated it), the request is sent once more with the new token.
    func post(
        _ url: URL,
        to endpoint: HTTPRequest.Endpoint = .token,
        _ fields: [(String, String)],
        proofKey: DPoPKey? = nil,
        workload: WorkloadField? = nil
    ) async throws(AuthGateError) -> HTTPResponse {
        var sent = try platformTokens(workload)
        let response = try await postOnce(url, to: endpoint, fields, proofKey: proofKey, workload: workload, tokens: sent)
        guard sent.assertion != nil || sent.field != nil, Self.refusesCredentials(response) else { return response }
        let current = try platformTokens(workload)
        guard current != sent else { return response }
        sent = current
        return try await postOnce(url, to: endpoint, fields, proofKey: proofKey, workload: workload, tokens: sent)
    }

    /// The platform tokens a request sends, as their files hold them now.
    private struct PlatformTokens: Equatable {
        var assertion: String?
        var field: String?
    }

    private func platformTokens(_ workload: WorkloadField?) throws(AuthGateError) -> PlatformTokens {
        let now = Date()
        return PlatformTokens(assertion: try client.assertionFile?.read(now: now), field: try workload?.file.read(now: now))
    }

    /// A refusal a rotated platform token may explain (RFC 6749 §5.2).
    private static func refusesCredentials(_ response: HTTPResponse) -> Bool {
        guard response.status == 400 || response.status == 401 else { return false }
        return response.status == 401 || ["invalid_client", "invalid_grant"].contains(OAuthErrorResponse(response)?.error)
    }

    private func postOnce(
        _ url: URL,
        to endpoint: HTTPRequest.Endpoint,
        _ fields: [(String, String)],
        proofKey: DPoPKey?,
        workload: WorkloadField?,
        tokens: PlatformTokens
    ) async throws(AuthGateError) -> HTTPResponse {
        var fields = fields
        if let workload, let token = tokens.field { fields.append((workload.name, token)) }
        var response = try await send(url, to: endpoint, fields, proofKey: proofKey, assertion: tokens.assertion)
        if let proofKey, let fresh = DPoPNonce.challenge(in: response) {
            nonce.remember(fresh)
            response = try await send(url, to: endpoint, fields, proofKey: proofKey, assertion: tokens.assertion)
            if DPoPNonce.challenge(in: response) != nil {
                throw AuthGateError(
                    .dpopRejected,
                    "\(provider) asked for a new DPoP nonce again right after authgate sent the one it asked for (use_dpop_nonce twice); the proof of key \(proofKey.thumbprint) was not accepted."
                )
            }
        }
        if proofKey != nil, let next = response.headers["dpop-nonce"], DPoPKey.isValidNonce(next) { nonce.remember(next) }
        return response
    }

    private func send(
        _ url: URL,
        to endpoint: HTTPRequest.Endpoint,
        _ fields: [(String, String)],
        proofKey: DPoPKey?,
        assertion: String?
    ) async throws(AuthGateError) -> HTTPResponse {
        var fields = fields
        var headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        let now = Date()
        client.authenticate(fields: &fields, headers: &headers, endpoint: url, now: now, platformAssertion: assertion)
        if let proofKey {
            headers.append(("DPoP", proofKey.proof(method: "POST", url: url, nonce: nonce.current, at: now)))
        }
        let request = HTTPRequest(method: .post, url: url, endpoint: endpoint, headers: headers, body: FormEncoding.encode(fields))
        do {
            return try await transport.send(request, policy: policy)
        } catch {
            throw ProviderFailure.transport(error, provider: provider)
        }
    }

    /// Requests tokens and reads the answer (RFC 6749 §5.1).
    /// - Parameters:
    ///   - fields: The grant's form fields, `grant_type` included.
    ///   - requestedScopes: Granted when the response names no `scope` (RFC 6749 §5.1).
    ///   - proofKey: The key to bind the tokens to (DPoP); the answer must then be a DPoP token.
    func requestTokens(
        at url: URL,
        _ fields: [(String, String)],
        purpose: TokenPurpose,
        requestedScopes: [String],
        proofKey: DPoPKey? = nil,
        workload: WorkloadField? = nil,
        now: Date
    ) async throws(AuthGateError) -> TokenSet {
        let response = try await post(url, fields, proofKey: proofKey, workload: workload)
        guard response.status == 200, oauthError(response) == nil else { throw refusal(response, purpose: purpose, scopes: requestedScopes) }
        var tokens = try parse(response, requestedScopes: requestedScopes, now: now)
        if let proofKey {
            // RFC 9449 §5: a server that ignored the proof answers `Bearer`; the file requires binding.
            guard tokens.tokenType.lowercased() == "dpop" || purpose == .exchange && tokens.tokenType == "N_A" else {
                throw AuthGateError(
                    .dpopRejected,
                    "\(provider) answered with a \(tokens.tokenType.prefix(64)) token instead of a DPoP-bound one, but its file sets dpop to \"required\"."
                )
            }
            if tokens.tokenType.lowercased() == "dpop" { tokens.tokenType = "DPoP" }
            tokens.proofKey = proofKey
        }
        return tokens
    }

    /// - Parameter what: The request, as a person would name it.
    /// - Parameter scopes: The scopes the request asked for, named when the provider refuses them.
    func refusal(_ response: HTTPResponse, purpose: TokenPurpose, what: String = "token request", scopes: [String] = []) -> AuthGateError {
        // Throttling (429, or 503 with Retry-After) is a wait, whatever error body comes with it
        // (Entra ID sends its JSON error with the 429): never a refusal of the request itself.
        if response.status == 429 || (response.status == 503 && response.retryAfterSeconds != nil) {
            return ProviderFailure.unexpected(response, provider: provider, what: what)
        }
        if let oauth = oauthError(response) {
            switch (oauth.error, purpose) {
            case ("invalid_grant", .passwordSignIn):
                return AuthGateError(.invalidCredentials, "The username or password is incorrect.")
            case ("invalid_grant", .refresh):
                return AuthGateError(.loginRequired, "\(provider) no longer accepts this session\(oauth.detail); sign in again.")
            case ("invalid_grant", .interactiveSignIn):
                // RFC 6749 §5.2: a code used twice, expired, issued for another redirect or verifier.
                return AuthGateError(
                    .loginRequired,
                    "\(provider) refused the authorization code (invalid_grant)\(oauth.detail): it was already used, has expired, or belongs to another sign-in; sign in again."
                )
            case ("invalid_dpop_proof", _):
                return AuthGateError(.dpopRejected, "\(provider) refused authgate's DPoP proof (invalid_dpop_proof)\(oauth.detail).")
            case ("use_dpop_nonce", _):
                return AuthGateError(.dpopRejected, "\(provider) demands a DPoP nonce (use_dpop_nonce) but sent none that authgate could use\(oauth.detail).")
            case ("invalid_target", .exchange), ("invalid_request", .exchange):
                return AuthGateError(
                    .validationFailed,
                    "\(provider) refused to exchange the token for that audience or resource (\(oauth.error))\(oauth.detail).",
                    fields: [FieldError(field: "audience", message: "refused by the provider")]
                )
            case ("invalid_grant", .workloadSignIn(let file)):
                return AuthGateError(
                    .providerUnavailable,
                    "\(provider) refused the platform token\(file.map { " of \($0.field) (\($0.path))" } ?? "") (invalid_grant)\(oauth.detail): check that the provider trusts its issuer, subject and audience."
                )
            case ("invalid_client", _) where client.assertionFile != nil:
                return AuthGateError(
                    .providerUnavailable,
                    "\(provider) does not accept authgate's client with the platform token of client_assertion_file (\(client.assertionFile?.path ?? "")) (invalid_client)\(oauth.detail): check that the client's federated credential names the token's issuer, subject and audience."
                )
            case ("invalid_client", _):
                return AuthGateError(
                    .providerUnavailable,
                    "\(provider) does not accept authgate's client (invalid_client)\(oauth.detail): the provider's file has a wrong client_id, client secret or client_auth."
                )
            case ("unauthorized_client", _), ("unsupported_grant_type", _):
                return AuthGateError(.unsupportedGrant, "\(provider) does not let this client use that grant (\(oauth.error))\(oauth.detail).")
            case ("invalid_scope", _):
                let asked = scopes.isEmpty ? "the requested scopes" : "the scopes \"\(scopes.joined(separator: " ").prefix(512))\""
                return AuthGateError(
                    .validationFailed,
                    "\(provider) refused \(asked)\(oauth.detail).",
                    fields: [FieldError(field: "scopes", message: "refused by the provider")]
                )
            case ("invalid_target", _):
                // RFC 8707 §2: the resource is unknown to the server or not allowed for this client.
                return AuthGateError(
                    .validationFailed,
                    "\(provider) refused the requested resource\(oauth.detail).",
                    fields: [FieldError(field: "resource", message: "refused by the provider")]
                )
            case ("access_denied", _):
                return AuthGateError(.permissionDenied, "\(provider) denied access\(oauth.detail).")
            default:
                return AuthGateError(.serverError, "\(provider) refused the token request with \"\(oauth.error.prefix(64))\"\(oauth.detail).")
            }
        }
        // Real servers answer 401/403 with an empty body or a page instead of RFC 6749 JSON.
        if response.status == 401 || response.status == 403 {
            switch purpose {
            case .passwordSignIn: return AuthGateError(.invalidCredentials, "The username or password is incorrect.")
            case .refresh: return AuthGateError(.loginRequired, "\(provider) no longer accepts this session; sign in again.")
            case .clientSignIn, .interactiveSignIn, .exchange, .workloadSignIn:
                return AuthGateError(
                    .providerUnavailable,
                    "\(provider) does not accept authgate's client (HTTP \(response.status)): check client_id and client_secret_file."
                )
            }
        }
        return ProviderFailure.unexpected(response, provider: provider, what: what)
    }

    /// The RFC 6749 §5.2 error `response` carries: in a 4xx answer, or in a 200 one from a
    /// provider whose file says it answers errors so (GitHub).
    func oauthError(_ response: HTTPResponse) -> OAuthErrorResponse? {
        OAuthErrorResponse(response, acceptingHTTP200: quirks.tokenErrorsWithHTTP200)
    }

    /// Reads a token response strictly: each member must have its RFC 6749 type.
    func parse(_ response: HTTPResponse, requestedScopes: [String], now: Date) throws(AuthGateError) -> TokenSet {
        let what = "token response"
        guard let object = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(
                provider,
                what: what,
                "it is not a JSON object\(ProviderFailure.describe(response).replacing(" and ", with: "; it came with "))"
            )
        }
        guard case .string(let accessToken) = object["access_token"], !accessToken.isEmpty else {
            throw ProviderFailure.malformed(provider, what: what, "access_token is missing or not a string")
        }
        // The token becomes an Authorization header (here, at the userinfo endpoint, and in
        // every caller's request) and a line of `authgate token`: a CR LF in it would add a
        // header of the provider's choosing.
        guard TokenShape.isB64Token(accessToken) else {
            throw ProviderFailure.malformed(provider, what: what, "access_token is not an RFC 6750 b64token (letters, digits and -._~+/ then =)")
        }
        guard case .string(let tokenType) = object["token_type"], TokenShape.isToken(tokenType) else {
            throw ProviderFailure.malformed(provider, what: what, "token_type is missing or not a word like Bearer")
        }
        // RFC 6749 §5.1 only RECOMMENDS expires_in: without it, the file's expires_in_default
        // (an hour unless it says otherwise; "never" for tokens that live until revoked).
        var lifetime: Double? = 3600
        switch object["expires_in"] {
        case nil, .null:
            switch quirks.missingLifetime {
            case .seconds(let seconds): lifetime = Double(seconds)
            case .never: lifetime = nil
            }
        case .number(let seconds) where seconds > 0: lifetime = seconds
        // Some servers send the number as a string; accept it when it is one.
        case .string(let text) where (Double(text) ?? 0) > 0: lifetime = Double(text) ?? 0
        default: throw ProviderFailure.malformed(provider, what: what, "expires_in is not a positive number")
        }
        func optionalString(_ key: String) throws(AuthGateError) -> String? {
            switch object[key] {
            case nil, .null: return nil
            case .string(let value) where !value.isEmpty: return value
            default: throw ProviderFailure.malformed(provider, what: what, "\(key) is not a string")
            }
        }
        let scopes = try optionalString("scope").map { $0.split(separator: " ").map(String.init) } ?? requestedScopes
        let refreshToken = try optionalString("refresh_token")
        if let refreshToken, !TokenShape.isVisibleASCII(refreshToken) {
            throw ProviderFailure.malformed(provider, what: what, "refresh_token is not of RFC 6749 Appendix A visible characters")
        }
        let idToken = try optionalString("id_token")
        if let idToken, !TokenShape.isCompactJWS(idToken) {
            throw ProviderFailure.malformed(provider, what: what, "id_token is not a compact JWS (base64url parts joined by dots)")
        }
        var tokens = TokenSet(
            accessToken: Secret(accessToken),
            tokenType: tokenType.lowercased() == "bearer" ? "Bearer" : tokenType,
            expiresAt: lifetime.map(now.addingTimeInterval) ?? .distantFuture,
            refreshToken: refreshToken.map(Secret.init),
            idToken: idToken.map(Secret.init),
            scopes: scopes
        )
        tokens.issuedTokenType = try optionalString("issued_token_type")  // RFC 8693 §2.2.1
        return tokens
    }
}

/// The shapes a token response's strings must have before they are stored, sent or printed.
enum TokenShape {
    /// RFC 6750 §2.1 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`,
    /// at most 16 KiB.
    static func isB64Token(_ text: String) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= 16 * 1024 else { return false }
        let body = bytes.prefix { $0 != UInt8(ascii: "=") }
        guard !body.isEmpty, bytes.dropFirst(body.count).allSatisfy({ $0 == UInt8(ascii: "=") }) else { return false }
        return body.allSatisfy { isAlphanumeric($0) || "-._~+/".utf8.contains($0) }
    }

    /// RFC 6749 Appendix A `VSCHAR` (`%x20-7E`), at most 16 KiB: `refresh_token`.
    static func isVisibleASCII(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 16 * 1024 && text.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
    }

    /// A `token_type` (RFC 6749 §7.1, a `type-name` in Appendix A.7): letters, digits, `-`, `.`, `_`; at most 64.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64 && text.utf8.allSatisfy { isAlphanumeric($0) || "-._".utf8.contains($0) }
    }

    /// A compact JWS (RFC 7515 §7.1): three base64url parts joined by dots, at most 64 KiB.
    static func isCompactJWS(_ text: String) -> Bool {
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return text.utf8.count <= 64 * 1024 && parts.count == 3 && !parts[0].isEmpty && !parts[1].isEmpty
            && parts.allSatisfy { $0.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") } }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || ((byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z"))
    }
}
