public import AuthGateCore
public import AuthGateHTTP
public import FoundationEssentials

/// The client metadata of an RFC 7591 registration request (§2), as authgate sends it.
public struct ClientMetadata: Sendable, Equatable {
    /// `redirect_uris`: the loopback ones of RFC 8252 §7.3 for a browser sign-in.
    public var redirectURIs: [String]
    /// `grant_types`, wire names (RFC 7591 §2).
    public var grantTypes: [String]
    /// `token_endpoint_auth_method`: `none` for a public client.
    public var tokenEndpointAuthMethod: String
    public var clientName: String?
    /// `scope`: space-separated.
    public var scope: String?
    /// `jwks`: the public keys of a private_key_jwt client (RFC 7591 §2).
    public var jwks: JSONValue?

    public init(
        redirectURIs: [String],
        grantTypes: [String],
        tokenEndpointAuthMethod: String,
        clientName: String? = nil,
        scope: String? = nil,
        jwks: JSONValue? = nil
    ) {
        self.redirectURIs = redirectURIs
        self.grantTypes = grantTypes
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.clientName = clientName
        self.scope = scope
        self.jwks = jwks
    }

    /// The JSON request body. `application_type` `native` (OpenID Connect Dynamic Client
    /// Registration 1.0 §2) is what lets a provider accept http loopback redirect URIs;
    /// `response_types` is `code` only for a client with the authorization code grant.
    public var json: JSONValue {
        var document: [String: JSONValue] = [
            "application_type": .string("native"),
            "grant_types": .array(grantTypes.map(JSONValue.string)),
            "token_endpoint_auth_method": .string(tokenEndpointAuthMethod),
        ]
        if !redirectURIs.isEmpty { document["redirect_uris"] = .array(redirectURIs.map(JSONValue.string)) }
        if grantTypes.contains("authorization_code") { document["response_types"] = .array([.string("code")]) }
        if let clientName { document["client_name"] = .string(clientName) }
        if let scope { document["scope"] = .string(scope) }
        if let jwks { document["jwks"] = jwks }
        return .object(document)
    }
}

/// What a provider registered (RFC 7591 §3.2.1): the client's credentials, its RFC 7592
/// management URI and token, and the metadata as the provider accepted it (which may differ
/// from what was asked).
public struct RegisteredClient: Sendable, Equatable {
    public var clientID: String
    public var clientSecret: Secret?
    /// When the secret expires, seconds since 1970; 0 for never (RFC 7591 §3.2.1).
    public var clientSecretExpiresAt: Int?
    public var registrationClientURI: String?
    public var registrationAccessToken: Secret?
    public var grantTypes: [String]?
    public var redirectURIs: [String]?
    public var tokenEndpointAuthMethod: String?
    public var scope: String?

    public init(
        clientID: String,
        clientSecret: Secret? = nil,
        clientSecretExpiresAt: Int? = nil,
        registrationClientURI: String? = nil,
        registrationAccessToken: Secret? = nil,
        grantTypes: [String]? = nil,
        redirectURIs: [String]? = nil,
        tokenEndpointAuthMethod: String? = nil,
        scope: String? = nil
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientSecretExpiresAt = clientSecretExpiresAt
        self.registrationClientURI = registrationClientURI
        self.registrationAccessToken = registrationAccessToken
        self.grantTypes = grantTypes
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.scope = scope
    }
}

/// RFC 7591 dynamic client registration and the RFC 7592 §2.3 delete, over ``HTTPTransport``
/// (libcurl in the daemon). Errors never hold a secret: no token, no secret, no body but a
/// sanitized `error_description`.
public enum ClientRegistration {
    /// The registration request: a JSON POST, with the initial access token as a Bearer
    /// token when the provider demands one (RFC 7591 §3).
    public static func request(_ metadata: ClientMetadata, endpoint: URL, initialAccessToken: Secret?) -> HTTPRequest {
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Accept", "application/json")]
        if let initialAccessToken { headers.append(("Authorization", "Bearer \(initialAccessToken.exposedValue)")) }
        return HTTPRequest(method: .post, url: endpoint, endpoint: .registration, headers: headers, body: metadata.json.jsonBytes)
    }

    /// Registers a client at `endpoint`.
    /// - Throws: `registration_refused` for an RFC 7591 §3.2.2 error or a 401/403 (the
    ///   initial access token missing or refused); `network_error`, `service_unavailable`,
    ///   `server_error` as for any provider request (a malformed answer is `server_error`).
    public static func register(
        _ metadata: ClientMetadata,
        at endpoint: URL,
        initialAccessToken: Secret?,
        policy: HTTPRequestPolicy,
        transport: any HTTPTransport = CurlTransport()
    ) async throws(AuthGateError) -> RegisteredClient {
        let provider = endpoint.host ?? "the provider"
        let response: HTTPResponse
        do {
            response = try await transport.send(request(metadata, endpoint: endpoint, initialAccessToken: initialAccessToken), policy: policy)
        } catch {
            throw ProviderFailure.transport(error, provider: provider)
        }
        return try parse(response, provider: provider, withInitialAccessToken: initialAccessToken != nil)
    }

    /// Reads a registration response (RFC 7591 §3.2).
    public static func parse(_ response: HTTPResponse, provider: String, withInitialAccessToken: Bool) throws(AuthGateError) -> RegisteredClient {
        let what = "client registration"
        switch response.status {
        case 200, 201:
            break
        case 401, 403:
            let oauth = OAuthErrorResponse(response)
            let cause =
                withInitialAccessToken
                ? "it refused the initial access token" : "it demands an initial access token (--initial-access-token-file)"
            throw AuthGateError(.registrationRefused, "\(provider) refused the \(what): \(cause) (HTTP \(response.status))\(oauth?.detail ?? "").")
        case 400..<500:
            guard let oauth = OAuthErrorResponse(response) else { throw ProviderFailure.unexpected(response, provider: provider, what: what) }
            throw AuthGateError(
                .registrationRefused,
                "\(provider) refused the \(what): \(ProviderFailure.sanitize(oauth.error) ?? "error")\(oauth.detail)."
            )
        default:
            throw ProviderFailure.unexpected(response, provider: provider, what: what)
        }
        guard let document = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(provider, what: "\(what) response", "it is not a JSON object")
        }
        func string(_ key: String) throws(AuthGateError) -> String? {
            guard let value = document[key], value != .null else { return nil }
            guard let text = value.stringValue, !text.isEmpty else {
                throw ProviderFailure.malformed(provider, what: "\(what) response", "\(key) is not a non-empty string")
            }
            return text
        }
        func strings(_ key: String) throws(AuthGateError) -> [String]? {
            guard let value = document[key], value != .null else { return nil }
            guard case .array(let items) = value, case let texts = items.compactMap(\.stringValue), texts.count == items.count else {
                throw ProviderFailure.malformed(provider, what: "\(what) response", "\(key) is not an array of strings")
            }
            return texts
        }
        guard let clientID = try string("client_id") else {
            throw ProviderFailure.malformed(provider, what: "\(what) response", "client_id is missing")
        }
        var expiresAt: Int?
        if let value = document["client_secret_expires_at"], value != .null {
            guard case .number(let number) = value, number >= 0, number == number.rounded(), number < 1e12 else {
                throw ProviderFailure.malformed(provider, what: "\(what) response", "client_secret_expires_at is not a time")
            }
            expiresAt = Int(number)
        }
        let clientURI = try string("registration_client_uri")
        let accessToken = try string("registration_access_token")
        // RFC 7592 §3: the two come together; one without the other cannot be used.
        guard (clientURI == nil) == (accessToken == nil) else {
            throw ProviderFailure.malformed(
                provider,
                what: "\(what) response",
                "registration_client_uri and registration_access_token must come together (RFC 7592 §3)"
            )
        }
        if let clientURI {
            guard let url = URL(string: clientURI), url.scheme?.lowercased() == "https" || url.scheme?.lowercased() == "http" else {
                throw ProviderFailure.malformed(provider, what: "\(what) response", "registration_client_uri is not a URL")
            }
        }
        return RegisteredClient(
            clientID: clientID,
            clientSecret: try string("client_secret").map(Secret.init),
            clientSecretExpiresAt: expiresAt,
            registrationClientURI: clientURI,
            registrationAccessToken: accessToken.map(Secret.init),
            grantTypes: try strings("grant_types"),
            redirectURIs: try strings("redirect_uris"),
            tokenEndpointAuthMethod: try string("token_endpoint_auth_method"),
            scope: try string("scope")
        )
    }

    /// Deletes a registered client (RFC 7592 §2.3): DELETE of its `registration_client_uri`
    /// with its `registration_access_token`. 204 (or 200) is done; 404 and 410 say the client is
    /// gone already, which is done too.
    /// - Throws: `registration_refused` for a 401/403 (the token is not accepted, or the
    ///   client is gone at a provider that answers so, RFC 7592 §2.3) or a 405 (the provider
    ///   does not delete clients); `network_error`, `service_unavailable`, `server_error`.
    public static func delete(
        clientURI: URL,
        accessToken: Secret,
        policy: HTTPRequestPolicy,
        transport: any HTTPTransport = CurlTransport()
    ) async throws(AuthGateError) {
        let provider = clientURI.host ?? "the provider"
        let request = HTTPRequest(
            method: .delete,
            url: clientURI,
            endpoint: .registration,
            headers: [("Authorization", "Bearer \(accessToken.exposedValue)"), ("Accept", "application/json")]
        )
        let response: HTTPResponse
        do {
            response = try await transport.send(request, policy: policy)
        } catch {
            throw ProviderFailure.transport(error, provider: provider)
        }
        let what = "deletion of the registered client"
        switch response.status {
        case 200, 204, 404, 410:
            return
        case 401, 403:
            throw AuthGateError(
                .registrationRefused,
                "\(provider) refused the \(what): it does not accept the registration access token (HTTP \(response.status); the client may be gone already)\(OAuthErrorResponse(response)?.detail ?? "")."
            )
        case 405:
            throw AuthGateError(.registrationRefused, "\(provider) refused the \(what): it does not delete clients (HTTP 405).")
        default:
            throw ProviderFailure.unexpected(response, provider: provider, what: what)
        }
    }
}
