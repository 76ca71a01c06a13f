import AuthGateCore
public import FoundationEssentials

/// The endpoints and capabilities of a provider: from OpenID Connect Discovery for `oidc`,
/// from the file for `oauth2`; endpoints in the file override discovered ones.
public struct ProviderMetadata: Sendable, Hashable {
    public var issuer: String?
    public var tokenEndpoint: URL
    public var authorizationEndpoint: URL?
    public var deviceAuthorizationEndpoint: URL?
    public var revocationEndpoint: URL?
    public var userinfoEndpoint: URL?
    public var jwksURI: URL?
    /// `grant_types_supported`; `nil` when the provider does not say.
    public var grantTypesSupported: [String]?
    /// RFC 9207 §3: the provider sends `iss` with authorization responses.
    public var authorizationResponseIssParameterSupported: Bool
    /// RFC 9126 §5: where authorization requests are pushed, and whether they must be.
    public var pushedAuthorizationRequestEndpoint: URL? = nil
    public var requirePushedAuthorizationRequests = false
    /// What else the provider offers, as its discovery document says (RFC 8414 §2, RFC 9449
    /// §5.1): read for `provider.discover`; empty when not said.
    public var registrationEndpoint: URL? = nil
    public var codeChallengeMethodsSupported: [String] = []
    public var dpopSigningAlgValuesSupported: [String] = []
    public var tokenEndpointAuthMethodsSupported: [String] = []
    public var scopesSupported: [String] = []

    /// Reads an OpenID Provider Configuration document (OpenID Connect Discovery 1.0 §3).
    /// - Throws: A message naming the offending member.
    /// - Parameter mutualTLS: The client authenticates with a certificate: the endpoints of
    ///   `mtls_endpoint_aliases` (RFC 8705 §5) replace the plain ones.
    static func discovered(
        _ document: [String: JSONValue],
        overrides: RemoteProviderSettings.Endpoints,
        mutualTLS: Bool = false
    ) throws(MetadataError) -> ProviderMetadata {
        var aliases: [String: JSONValue] = [:]
        if mutualTLS, let value = document["mtls_endpoint_aliases"] {
            guard let object = value.objectValue else { throw MetadataError("mtls_endpoint_aliases is not an object") }
            aliases = object
        }
        func url(_ key: String, required: Bool = false) throws(MetadataError) -> URL? {
            guard let value = aliases[key] ?? document[key] else {
                if required { throw MetadataError("\(key) is missing") }
                return nil
            }
            guard let string = value.stringValue, let url = URL(string: string), url.scheme != nil, url.host != nil else {
                throw MetadataError("\(key) is not a URL")
            }
            return url
        }
        var grants: [String]?
        if case .array(let items) = document["grant_types_supported"] {
            grants = items.compactMap(\.stringValue)
        }
        func strings(_ key: String) -> [String] {
            guard case .array(let items) = document[key] else { return [] }
            return items.compactMap(\.stringValue)
        }
        /// The file's endpoint when it names one, else the discovered one.
        func endpoint(_ override: URL?, _ key: String, required: Bool = false) throws(MetadataError) -> URL? {
            if let override { return override }
            return try url(key, required: required)
        }
        guard let issuer = document["issuer"]?.stringValue else { throw MetadataError("issuer is missing") }
        guard let tokenEndpoint = try endpoint(overrides.token, "token_endpoint", required: true) else {
            throw MetadataError("token_endpoint is missing")
        }
        return ProviderMetadata(
            issuer: issuer,
            tokenEndpoint: tokenEndpoint,
            authorizationEndpoint: try endpoint(overrides.authorization, "authorization_endpoint"),
            deviceAuthorizationEndpoint: try endpoint(overrides.deviceAuthorization, "device_authorization_endpoint"),
            revocationEndpoint: try endpoint(overrides.revocation, "revocation_endpoint"),
            userinfoEndpoint: try endpoint(overrides.userinfo, "userinfo_endpoint"),
            jwksURI: try endpoint(overrides.jwks, "jwks_uri", required: true),
            grantTypesSupported: grants,
            authorizationResponseIssParameterSupported: document["authorization_response_iss_parameter_supported"] == .bool(true),
            pushedAuthorizationRequestEndpoint: try url("pushed_authorization_request_endpoint"),
            requirePushedAuthorizationRequests: document["require_pushed_authorization_requests"] == .bool(true),
            registrationEndpoint: try url("registration_endpoint"),
            codeChallengeMethodsSupported: strings("code_challenge_methods_supported"),
            dpopSigningAlgValuesSupported: strings("dpop_signing_alg_values_supported"),
            tokenEndpointAuthMethodsSupported: strings("token_endpoint_auth_methods_supported"),
            scopesSupported: strings("scopes_supported")
        )
    }

    /// The metadata of an `oauth2` provider: its file's endpoints.
    static func configured(_ settings: RemoteProviderSettings) -> ProviderMetadata? {
        guard let token = settings.endpoints.token else { return nil }
        return ProviderMetadata(
            issuer: settings.issuer?.absoluteString,
            tokenEndpoint: token,
            authorizationEndpoint: settings.endpoints.authorization,
            deviceAuthorizationEndpoint: settings.endpoints.deviceAuthorization,
            revocationEndpoint: settings.endpoints.revocation,
            userinfoEndpoint: settings.endpoints.userinfo,
            jwksURI: settings.endpoints.jwks,
            grantTypesSupported: nil,
            authorizationResponseIssParameterSupported: false
        )
    }

    /// Every endpoint, for checking that none is plain http.
    var allEndpoints: [URL] {
        [
            tokenEndpoint, authorizationEndpoint, deviceAuthorizationEndpoint, revocationEndpoint, userinfoEndpoint, jwksURI,
            pushedAuthorizationRequestEndpoint,
        ].compactMap { $0 }
    }
}

/// A discovery document that cannot be used.
struct MetadataError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
