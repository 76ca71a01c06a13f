import AuthGateCore
import AuthGateHTTP
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import Crypto
import FoundationEssentials
import Logging

/// What `authgate provider add` and `provider remove` ask of a provider, for administrators:
/// `provider.discover` (an issuer's discovery document), `provider.register` and
/// `provider.deregister` (RFC 7591 dynamic client registration and the RFC 7592 §2.3 delete).
/// The provider HTTP runs here, through libcurl; the CLI links no HTTP client. The secrets
/// (initial and registration access tokens, client secret) are never logged.
struct RegistrationMethods: Sendable {
    let admin: AdminCheck
    let logger: Logger

    /// Administrators only: an issuer's discovery document, fetched here (the CLI links no
    /// HTTP client), with the checks a provider's validation makes.
    func providerDiscover(_ params: ProviderDiscoverParams, from caller: MethodCaller) async throws(AuthGateError) -> ProviderOffer {
        try admin.require("run discovery for a new provider", of: caller)
        let caBundle = try Self.readCABundle(params.caFile, for: caller)
        let metadata = try await ProviderDiscovery.discover(issuer: params.issuer, caBundle: caBundle)
        return ProviderOffer(
            issuer: params.issuer,
            tokenEndpoint: metadata.tokenEndpoint.absoluteString,
            authorizationEndpoint: metadata.authorizationEndpoint?.absoluteString,
            deviceAuthorizationEndpoint: metadata.deviceAuthorizationEndpoint?.absoluteString,
            pushedAuthorizationRequestEndpoint: metadata.pushedAuthorizationRequestEndpoint?.absoluteString,
            requirePushedAuthorizationRequests: metadata.requirePushedAuthorizationRequests,
            registrationEndpoint: metadata.registrationEndpoint?.absoluteString,
            grantTypes: metadata.grantTypesSupported,
            grants: Grant.allCases.filter { metadata.grantTypesSupported?.contains($0.wireName) ?? true },
            codeChallengeMethods: metadata.codeChallengeMethodsSupported,
            dpopSigningAlgs: metadata.dpopSigningAlgValuesSupported,
            tokenEndpointAuthMethods: metadata.tokenEndpointAuthMethodsSupported,
            scopes: metadata.scopesSupported,
            revocationEndpoint: metadata.revocationEndpoint?.absoluteString
        )
    }

    func providerRegister(_ params: ProviderRegisterParams, from caller: MethodCaller) async throws(AuthGateError) -> ProviderRegistration {
        try admin.require("register a client at a provider", of: caller)
        let caBundle = try Self.readCABundle(params.caFile, for: caller)
        let endpoint: URL
        switch (params.issuer, params.registrationEndpoint) {
        case (let issuer?, nil):
            let metadata = try await ProviderDiscovery.discover(issuer: issuer, caBundle: caBundle)
            guard let registration = metadata.registrationEndpoint else {
                throw AuthGateError(
                    .unsupportedGrant,
                    "\(issuer) offers no dynamic client registration: its discovery document names no registration_endpoint (RFC 8414 §2). Register a client by hand and pass --client-id."
                )
            }
            endpoint = registration
        case (nil, let given?):
            endpoint = try Self.httpsURL(given, field: "registration_endpoint")
        default:
            throw .validationFailed([FieldError(field: "issuer", message: "give either issuer or registration_endpoint")])
        }
        guard !params.grants.isEmpty else { throw .validationFailed([FieldError(field: "grants", message: "must name at least one grant")]) }
        if params.grants.contains(.authorizationCode), params.redirectURIs.isEmpty {
            throw .validationFailed([FieldError(field: "redirect_uris", message: "the authorization_code grant needs a redirect URI")])
        }
        var grantTypes = params.grants.map(\.wireName)
        if params.grants.contains(where: { !$0.isService }) { grantTypes.append("refresh_token") }
        let method = params.tokenEndpointAuthMethod ?? "none"
        // private_key_jwt: a new ES256 key, its public half registered as the client's jwks.
        let key = method == "private_key_jwt" ? P256.Signing.PrivateKey() : nil
        let keyID = key.map { _ in "authgate-" + Secret.random(bytes: 9).exposedValue }
        var jwks: JSONValue?
        if let key, let keyID {
            let point = Array(key.publicKey.x963Representation.dropFirst())  // 0x04, then x and y
            jwks = .object([
                "keys": .array([
                    .object([
                        "kty": .string("EC"), "crv": .string("P-256"), "use": .string("sig"), "alg": .string("ES256"), "kid": .string(keyID),
                        "x": .string(Base64URL.encode(Array(point.prefix(32)))), "y": .string(Base64URL.encode(Array(point.suffix(32)))),
                    ])
                ])
            ])
        }
        let metadata = ClientMetadata(
            redirectURIs: params.redirectURIs,
            grantTypes: grantTypes,
            tokenEndpointAuthMethod: method,
            clientName: params.clientName,
            scope: params.scope,
            jwks: jwks
        )
        let client = try await ClientRegistration.register(
            metadata,
            at: endpoint,
            initialAccessToken: params.initialAccessToken.map(Secret.init),
            policy: HTTPRequestPolicy(caBundle: caBundle)
        )
        logger.notice(
            "client registered",
            metadata: [
                "peer.uid": "\(caller.uid)", "registration.endpoint": "\(endpoint.absoluteString)", "client.id": "\(client.clientID)",
                "client.confidential": "\(client.clientSecret != nil)",
            ]
        )
        return ProviderRegistration(
            clientID: client.clientID,
            clientSecret: client.clientSecret?.exposedValue,
            clientSecretExpiresAt: client.clientSecretExpiresAt,
            registrationClientURI: client.registrationClientURI,
            registrationAccessToken: client.registrationAccessToken?.exposedValue,
            registrationEndpoint: endpoint.absoluteString,
            grantTypes: client.grantTypes,
            redirectURIs: client.redirectURIs,
            tokenEndpointAuthMethod: client.tokenEndpointAuthMethod,
            scope: client.scope,
            clientKeyPEM: key?.pemRepresentation,
            clientKeyID: keyID
        )
    }

    func providerDeregister(_ params: ProviderDeregisterParams, from caller: MethodCaller) async throws(AuthGateError) -> ProviderDeregistration {
        try admin.require("delete a registered client at a provider", of: caller)
        let caBundle = try Self.readCABundle(params.caFile, for: caller)
        let uri = try Self.httpsURL(params.registrationClientURI, field: "registration_client_uri")
        try await ClientRegistration.delete(
            clientURI: uri,
            accessToken: Secret(params.registrationAccessToken),
            policy: HTTPRequestPolicy(caBundle: caBundle)
        )
        logger.notice("registered client deleted", metadata: ["peer.uid": "\(caller.uid)", "registration.uri": "\(uri.absoluteString)"])
        return ProviderDeregistration(deleted: true)
    }

    /// The PEM bundle of an admin's `ca_file` param, checked like a provider file's `tls.ca_file`.
    ///
    /// The daemon reads it with its own rights, which an admin group's member may not have: for
    /// them the file must be readable by everyone (a CA bundle is public), and every way it can
    /// fail gets one sentence, so that the answer says nothing of files they cannot read
    /// themselves (whether `/root/…` exists).
    private static func readCABundle(_ file: String?, for caller: MethodCaller) throws(AuthGateError) -> [UInt8]? {
        guard let file else { return nil }
        guard file.hasPrefix("/") else { throw .validationFailed([FieldError(field: "ca_file", message: "must be an absolute path")]) }
        let onTheirOwnRights = !caller.isUnbounded
        let unusable = FieldError(
            field: "ca_file",
            message: "cannot be used: it must be a CA file everyone may read, in directories only root or the daemon's user can change"
        )
        if onTheirOwnRights, StorageFiles.pathStatus(file).map({ $0.permissions & 0o004 == 0 }) ?? true {
            throw .validationFailed([unusable])
        }
        switch FileTrust.read(file, as: .certificate, maximumSize: 4 << 20) {
        case .success(let bytes): return bytes
        case .failure where onTheirOwnRights: throw .validationFailed([unusable])
        case .failure(let problem): throw .validationFailed([FieldError(field: "ca_file", message: "\(problem.refused ? "refused: " : "")\(problem)")])
        }
    }

    private static func httpsURL(_ text: String, field: String) throws(AuthGateError) -> URL {
        guard let url = URL(string: text), url.scheme?.lowercased() == "https", url.host?.isEmpty == false, url.fragment == nil else {
            throw .validationFailed([FieldError(field: field, message: "must be an https URL without fragment")])
        }
        return url
    }
}
