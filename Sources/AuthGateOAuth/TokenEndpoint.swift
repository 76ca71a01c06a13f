import AuthGateCore
import AuthGateHTTP
import FoundationEssentials

/// What a token request is for; decides how a refusal reads to the user.
enum TokenPurpose: Sendable {
    case passwordSignIn
    case clientSignIn
    case refresh
    /// Redeeming what an interactive sign-in produced: an authorization code or a device code.
    case interactiveSignIn
}

/// The client side of a token endpoint: client authentication (RFC 6749 §2.3), the request,
/// and the reading of its answer, strictly.
struct TokenEndpoint: Sendable {
    let provider: String
    let clientID: String
    let clientSecret: Secret?
    let authentication: ClientAuthentication
    let transport: any HTTPTransport
    let policy: HTTPRequestPolicy

    /// A form POST with this client's authentication.
    func post(_ url: URL, _ fields: [(String, String)]) async throws(AuthGateError) -> HTTPResponse {
        var fields = fields
        var headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        switch authentication {
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: both parts form-encoded before Base64.
            let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(clientSecret?.exposedValue ?? "")
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case .clientSecretPost:
            fields += [("client_id", clientID), ("client_secret", clientSecret?.exposedValue ?? "")]
        case .none:
            fields.append(("client_id", clientID))
        }
        let request = HTTPRequest(method: .post, url: url, headers: headers, body: FormEncoding.encode(fields))
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
    func requestTokens(at url: URL, _ fields: [(String, String)], purpose: TokenPurpose, requestedScopes: [String],
                       now: Date) async throws(AuthGateError) -> TokenSet {
        let response = try await post(url, fields)
        guard response.status == 200 else { throw refusal(response, purpose: purpose) }
        return try parse(response, requestedScopes: requestedScopes, now: now)
    }

    /// - Parameter what: The request, as a person would name it.
    func refusal(_ response: HTTPResponse, purpose: TokenPurpose, what: String = "token request") -> AuthGateError {
        if let oauth = OAuthErrorResponse(response) {
            switch (oauth.error, purpose) {
            case ("invalid_grant", .passwordSignIn):
                return AuthGateError(.invalidCredentials, "The username or password is incorrect.")
            case ("invalid_grant", .refresh):
                return AuthGateError(.loginRequired, "\(provider) no longer accepts this session\(oauth.detail); sign in again.")
            case ("invalid_grant", .interactiveSignIn):
                // RFC 6749 §5.2: a code used twice, expired, issued for another redirect or verifier.
                return AuthGateError(.loginRequired, "\(provider) refused the authorization code (invalid_grant)\(oauth.detail): it was already used, has expired, or belongs to another sign-in; sign in again.")
            case ("invalid_client", _):
                return AuthGateError(.providerUnavailable, "\(provider) does not accept authgate's client (invalid_client)\(oauth.detail): the provider's file has a wrong client_id, client secret or client_auth.")
            case ("unauthorized_client", _), ("unsupported_grant_type", _):
                return AuthGateError(.unsupportedGrant, "\(provider) does not let this client use that grant (\(oauth.error))\(oauth.detail).")
            case ("invalid_scope", _):
                return AuthGateError(.validationFailed, "\(provider) refused the requested scopes\(oauth.detail).",
                                     fields: [FieldError(field: "scopes", message: "refused by the provider")])
            case ("invalid_target", _):
                // RFC 8707 §2: the resource is unknown to the server or not allowed for this client.
                return AuthGateError(.validationFailed, "\(provider) refused the requested resource\(oauth.detail).",
                                     fields: [FieldError(field: "resource", message: "refused by the provider")])
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
            case .clientSignIn, .interactiveSignIn:
                return AuthGateError(.providerUnavailable, "\(provider) does not accept authgate's client (HTTP \(response.status)): check client_id and client_secret_file.")
            }
        }
        return ProviderFailure.unexpected(response, provider: provider, what: what)
    }

    /// Reads a token response strictly: each member must have its RFC 6749 type.
    func parse(_ response: HTTPResponse, requestedScopes: [String], now: Date) throws(AuthGateError) -> TokenSet {
        let what = "token response"
        guard let object = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(provider, what: what, "it is not a JSON object\(ProviderFailure.describe(response).replacing(" and ", with: "; it came with "))")
        }
        guard case .string(let accessToken) = object["access_token"], !accessToken.isEmpty else {
            throw ProviderFailure.malformed(provider, what: what, "access_token is missing or not a string")
        }
        guard case .string(let tokenType) = object["token_type"], !tokenType.isEmpty else {
            throw ProviderFailure.malformed(provider, what: what, "token_type is missing or not a string")
        }
        var lifetime: Double = 3600  // RFC 6749 §5.1 only RECOMMENDS expires_in; assume an hour without it
        switch object["expires_in"] {
        case nil, .null: break
        case .number(let seconds) where seconds > 0: lifetime = seconds
        // Some servers send the number as a string; accept it when it is one.
        case .string(let text) where Double(text).map({ $0 > 0 }) == true: lifetime = Double(text)!
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
        return TokenSet(
            accessToken: Secret(accessToken), tokenType: tokenType.lowercased() == "bearer" ? "Bearer" : tokenType,
            expiresAt: now.addingTimeInterval(lifetime), refreshToken: try optionalString("refresh_token").map(Secret.init),
            idToken: try optionalString("id_token").map(Secret.init), scopes: scopes)
    }
}
