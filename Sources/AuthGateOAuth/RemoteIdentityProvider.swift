public import AuthGateCore
public import AuthGateHTTP
import Crypto
public import FoundationEssentials
public import Logging

/// How a provider fared when its endpoints were checked over the network.
public struct ProviderValidation: Sendable {
    public enum Outcome: Sendable, Hashable {
        /// Discovery (or the token endpoint probe) and the JWKS worked.
        case ready
        /// It could not be reached or answered 5xx/nonsense; worth retrying.
        case unreachable
        /// It answered, but contradicts its file (e.g. another issuer): fixed by editing the file.
        case invalid
    }

    public var outcome: Outcome
    /// Why it is not `ready`, for a person.
    public var reason: String?
    /// Things that work but deserve the admin's attention.
    public var warnings: [String]
}

/// An OAuth 2.0 / OpenID Connect server, spoken to over HTTPS through an ``HTTPTransport``.
///
/// For `oidc` providers the endpoints come from discovery (fetched on the first use when
/// start-up validation could not reach the provider); ID tokens are always verified.
public actor RemoteIdentityProvider: IdentityProvider {
    public nonisolated let configuration: ProviderConfiguration
    let settings: RemoteProviderSettings
    let isOIDC: Bool
    let tokenEndpoint: TokenEndpoint
    /// SHA-256 over every file read at start (client secret, CA bundle, client certificate and
    /// its key, assertion key), each with its field's name; compared by a reload to notice a
    /// file rotated in place.
    private nonisolated let trustedFilesDigest: [UInt8]
    private let transport: any HTTPTransport
    private let policy: HTTPRequestPolicy
    let now: @Sendable () -> Date
    let logger: Logger
    private var metadata: ProviderMetadata?
    /// The key of `assertion_key_file`, which signs the `jwt_bearer` grant's assertions.
    let assertionSigningKey: ClientSigningKey?
    /// Fetches the JWKS through this provider's resolved metadata.
    private lazy var verifier = IDTokenVerifier(provider: configuration.id.rawValue) { [weak self] () async throws(AuthGateError) -> [UInt8] in
        guard let self else { throw AuthGateError(.internalError, "The provider was unloaded.") }
        return try await self.fetchJWKS()
    }

    /// - Throws: `provider_unavailable` when the client secret file cannot be read, or it or the
    ///   CA file could be changed by others (``FileTrust``).
    public init(
        configuration: ProviderConfiguration,
        transport: any HTTPTransport = CurlTransport(),
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger
    ) throws(AuthGateError) {
        let settings: RemoteProviderSettings
        switch configuration.settings {
        case .oidc(let remote):
            settings = remote
            isOIDC = true
        case .oauth2(let remote):
            settings = remote
            isOIDC = false
        case .mock: preconditionFailure("a mock provider is not remote")
        }
        /// Reads a file the provider needs, with the trust rules of its kind.
        var digest = SHA256()
        func read(_ file: String, as kind: FileTrust.Kind, field: String, maximumSize: Int) throws(AuthGateError) -> [UInt8] {
            switch FileTrust.read(file, as: kind, maximumSize: maximumSize) {
            case .success(let bytes):
                digest.update(data: Array("\(field)=\(bytes.count):".utf8))
                digest.update(data: bytes)
                return bytes
            case .failure(let problem):
                throw AuthGateError(.providerUnavailable, "\(configuration.file): $.\(field): \(problem.refused ? "refused: " : "")\(problem)")
            }
        }
        var secret: Secret?
        if let file = settings.clientSecretFile {
            let text = String(decoding: try read(file, as: .secret, field: "client_secret_file", maximumSize: 64 * 1024), as: UTF8.self)
            let trimmed = text.trimming(while: \.isWhitespace)
            guard !trimmed.isEmpty else {
                throw AuthGateError(.providerUnavailable, "\(configuration.file): $.client_secret_file: \(file) is empty")
            }
            secret = Secret(trimmed)
        }
        // Read into memory once, here (the provider's validation), and handed to libcurl as a
        // blob: curl never opens the path, which could be swapped after this check.
        let caBundle = try settings.caFile.map { file throws(AuthGateError) in try read(file, as: .certificate, field: "tls.ca_file", maximumSize: 4 << 20) }
        var clientCertificate: HTTPRequestPolicy.ClientCertificate?
        if let certificate = settings.tlsClientCertificateFile, let key = settings.tlsClientKeyFile {
            clientCertificate = .init(
                certificate: try read(certificate, as: .certificate, field: "tls.client_cert_file", maximumSize: 1 << 20),
                key: try read(key, as: .secret, field: "tls.client_key_file", maximumSize: 1 << 20)
            )
        }
        var signingKey: ClientSigningKey?
        if let file = settings.clientKeyFile {
            let pem = String(decoding: try read(file, as: .secret, field: "client_key_file", maximumSize: 1 << 20), as: UTF8.self)
            guard let key = ClientSigningKey(pem: pem, keyID: settings.clientKeyID) else {
                throw AuthGateError(
                    .providerUnavailable,
                    "\(configuration.file): $.client_key_file: \(file) holds no PEM EC P-256 or RSA (2048 bits or more) private key"
                )
            }
            signingKey = key
        }
        if let assertionKey = settings.workload.assertionKey {
            let pem = String(decoding: try read(assertionKey.file, as: .secret, field: "assertion_key_file", maximumSize: 1 << 20), as: UTF8.self)
            guard let key = ClientSigningKey(pem: pem, keyID: assertionKey.keyID) else {
                throw AuthGateError(
                    .providerUnavailable,
                    "\(configuration.file): $.assertion_key_file: \(assertionKey.file) holds no PEM EC P-256 or RSA (2048 bits or more) private key"
                )
            }
            assertionSigningKey = key
        } else {
            assertionSigningKey = nil
        }
        self.configuration = configuration
        self.settings = settings
        self.transport = transport
        self.now = now
        self.logger = logger
        policy = HTTPRequestPolicy(
            caBundle: caBundle,
            connectTimeoutMilliseconds: settings.connectTimeoutMilliseconds,
            totalTimeoutMilliseconds: settings.totalTimeoutMilliseconds,
            allowInsecureLoopback: settings.allowInsecureHTTPLoopback,
            clientCertificate: clientCertificate
        )
        trustedFilesDigest = Array(digest.finalize())
        var client = ClientAuthenticator(clientID: settings.clientID, method: settings.clientAuthentication, secret: secret, signingKey: signingKey)
        let provider = configuration.id.rawValue
        client.assertionFile = settings.workload.clientAssertionFile.map {
            WorkloadTokenFile(path: $0, field: "client_assertion_file", provider: provider)
        }
        var tokenEndpoint = TokenEndpoint(provider: configuration.id.rawValue, client: client, transport: transport, policy: policy)
        tokenEndpoint.quirks = settings.quirks
        self.tokenEndpoint = tokenEndpoint
        metadata = isOIDC ? nil : ProviderMetadata.configured(settings)
    }

    var name: String { configuration.id.rawValue }

    /// True when both read the same bytes from the same trusted files (client secret, CA
    /// bundle, client certificate and key, assertion key): a file replaced in place makes a
    /// reload count the provider as changed.
    public nonisolated func hasSameTrustedFiles(as other: RemoteIdentityProvider) -> Bool {
        trustedFilesDigest == other.trustedFilesDigest
    }

    // MARK: Validation

    /// Checks the provider's endpoints over the network (start-up, reload, retries).
    public func validate() async -> ProviderValidation {
        do throws(DiscoveryFailure) {
            var warnings: [String] = []
            if isOIDC {
                let discovered = try await discover()
                do {
                    warnings += try await verifier.reload()
                } catch {
                    throw .unreachable(error)
                }
                if let supported = discovered.grantTypesSupported {
                    for grant in settings.grants where !supported.contains(grant.wireName) {
                        warnings.append("discovery does not list the \(grant.rawValue) grant in grant_types_supported; trying it anyway")
                    }
                }
            } else {
                try await probeTokenEndpoint()
            }
            return ProviderValidation(outcome: .ready, reason: nil, warnings: warnings)
        } catch {
            switch error {
            case .refused(let message): return ProviderValidation(outcome: .invalid, reason: message, warnings: [])
            case .unreachable(let error): return ProviderValidation(outcome: .unreachable, reason: error.message, warnings: [])
            }
        }
    }

    /// Fetches and checks the discovery document (OpenID Connect Discovery 1.0 §4), with what
    /// only the RFC 8414 authorization server metadata names added (``MetadataDocuments``).
    @discardableResult
    private func discover() async throws(DiscoveryFailure) -> ProviderMetadata {
        guard let issuer = settings.issuer else { throw .unreachable(AuthGateError(.internalError, "An oidc provider without an issuer.")) }
        guard let url = MetadataDocuments.openIDConfigurationURL(issuer: issuer.absoluteString) else {
            throw .unreachable(AuthGateError(.internalError, "An oidc provider whose issuer makes no discovery URL."))
        }
        // Both at once: the second one costs no round trip of its own.
        async let authorizationServer = MetadataDocuments.authorizationServerMetadata(
            issuer: issuer.absoluteString,
            transport: transport,
            policy: policy
        )
        let response: HTTPResponse
        do {
            response = try await get(url, .discovery, what: "discovery document")
        } catch {
            throw .unreachable(error)
        }
        guard let openID = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw .unreachable(ProviderFailure.malformed(name, what: "discovery document", "it is not a JSON object"))
        }
        let document = MetadataDocuments.merged(openID: openID, authorizationServer: await authorizationServer)
        let discovered: ProviderMetadata
        do {
            discovered = try ProviderMetadata.discovered(document, overrides: settings.endpoints, mutualTLS: settings.clientAuthentication.isMutualTLS)
        } catch {
            throw .unreachable(ProviderFailure.malformed(name, what: "discovery document", error.message))
        }
        // Discovery §4.3: the issuer must be exactly the configured one (or the file's
        // issuer_template, for a multi-tenant endpoint), or this is not our provider.
        let expected = settings.quirks.issuerTemplate ?? issuer.absoluteString
        guard discovered.issuer == expected else {
            throw .refused("the discovery document names the issuer \"\(discovered.issuer?.prefix(200) ?? "")\", not the configured \"\(expected)\"")
        }
        for endpoint in discovered.allEndpoints where !policy.allows(endpoint) {
            throw .refused("the discovery document points to \(endpoint.absoluteString.prefix(200)), which is not https")
        }
        metadata = discovered
        logger.debug("discovery fetched", metadata: ["provider.id": "\(name)"])
        return discovered
    }

    /// An `oauth2` provider has no discovery: any well-formed answer from its token endpoint
    /// to a request with a made-up grant type proves it is there.
    private func probeTokenEndpoint() async throws(DiscoveryFailure) {
        guard let metadata else { throw .unreachable(AuthGateError(.internalError, "An oauth2 provider without a token endpoint.")) }
        let response: HTTPResponse
        do {
            response = try await tokenEndpoint.post(metadata.tokenEndpoint, [("grant_type", "urn:authgate:probe")])
        } catch {
            throw .unreachable(error)
        }
        if OAuthErrorResponse(response)?.error == "invalid_client" {
            throw .refused("the token endpoint does not accept authgate's client (invalid_client): check client_id and the client secret")
        }
        if response.status >= 500 { throw .unreachable(ProviderFailure.unexpected(response, provider: name, what: "token endpoint probe")) }
    }

    private func fetchJWKS() async throws(AuthGateError) -> [UInt8] {
        let metadata = try await resolvedMetadata()
        guard let jwksURI = metadata.jwksURI else {
            throw AuthGateError(.serverError, "\(name) publishes no JWKS, so its ID tokens cannot be verified.")
        }
        return try await get(jwksURI, .jwks, what: "JWKS").body
    }

    func resolvedMetadata() async throws(AuthGateError) -> ProviderMetadata {
        if let metadata { return metadata }
        do {
            return try await discover()
        } catch {
            switch error {
            case .refused(let message): throw AuthGateError(.providerUnavailable, "\(name) cannot be used: \(message).")
            case .unreachable(let error): throw error
            }
        }
    }

    /// - Parameter bearer: Tokens whose access token authorizes the request; with a DPoP
    ///   proof of their key when they are bound (RFC 9449 §7.1).
    private func get(_ url: URL, _ endpoint: HTTPRequest.Endpoint, what: String, bearer: TokenSet? = nil) async throws(AuthGateError) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let bearer {
            if let key = bearer.proofKey {
                headers.append(("Authorization", "DPoP " + bearer.accessToken.exposedValue))
                headers.append(("DPoP", key.proof(method: "GET", url: url, nonce: nil, accessToken: bearer.accessToken, at: Date())))
            } else {
                headers.append(("Authorization", "Bearer " + bearer.accessToken.exposedValue))
            }
        }
        let response: HTTPResponse
        do {
            response = try await transport.send(HTTPRequest(method: .get, url: url, endpoint: endpoint, headers: headers), policy: policy)
        } catch {
            throw ProviderFailure.transport(error, provider: name)
        }
        guard response.status == 200 else {
            if bearer != nil, response.status == 401 {
                throw AuthGateError(.loginRequired, "\(name) no longer accepts this access token; sign in again.")
            }
            throw ProviderFailure.unexpected(response, provider: name, what: what)
        }
        return response
    }

    // MARK: IdentityProvider

    public func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult {
        try credentials.validate()
        let scopes = credentials.scopes.isEmpty ? configuration.scopes : credentials.scopes
        let metadata = try await resolvedMetadata()
        let tokens = try await tokenEndpoint.requestTokens(
            at: metadata.tokenEndpoint,
            PasswordGrant.fields(credentials, scopes: scopes, audience: settings.audience),
            purpose: .passwordSignIn,
            requestedScopes: scopes,
            proofKey: newProofKey(),
            now: now()
        )
        return try await signedIn(tokens)
    }

    /// A new key for a new session's tokens when the file sets `"dpop": "required"`.
    func newProofKey() -> DPoPKey? {
        settings.dpop == .required ? DPoPKey() : nil
    }

    public func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult {
        try await signInAsService(.clientCredentials, variant, proofKey: newProofKey())
    }

    public func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        try await refresh(refreshToken, variant: variant, proofKey: nil)
    }

    /// RFC 9449 §5: a refresh of DPoP-bound tokens is proven with the same key.
    public func refresh(_ refreshToken: Secret, variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> TokenSet {
        let metadata = try await resolvedMetadata()
        var tokens = try await tokenEndpoint.requestTokens(
            at: metadata.tokenEndpoint,
            RefreshGrant.fields(refreshToken, variant: variant),
            purpose: .refresh,
            requestedScopes: variant.scopes,
            proofKey: proofKey,
            now: now()
        )
        if let idToken = tokens.idToken {
            // Some servers issue an ID token on refresh only; it is verified like any other
            // (its `iss` is this provider's), and the session checks its `sub` is the session's.
            tokens.idTokenSubject = try await verify(idToken, nonce: nil).sub
        }
        return tokens
    }

    /// RFC 8693 §2.1: the session's access token as the subject; the issued token is bound to
    /// the session's key when the session's is.
    public func exchange(_ tokens: TokenSet, for variant: TokenVariant) async throws(AuthGateError) -> TokenSet {
        let metadata = try await resolvedMetadata()
        var issued = try await tokenEndpoint.requestTokens(
            at: metadata.tokenEndpoint,
            TokenExchangeGrant.fields(subject: tokens.accessToken, variant: variant),
            purpose: .exchange,
            requestedScopes: variant.scopes,
            proofKey: tokens.proofKey,
            now: now()
        )
        issued.issuedTokenType = try TokenExchangeGrant.issuedTokenType(issued, provider: name)
        issued.refreshToken = nil  // renewed by exchanging again, never by refreshing it
        return issued
    }

    public func revoke(_ tokens: TokenSet) async {
        _ = await revokeReporting(tokens)
    }

    public func revokeReporting(_ tokens: TokenSet) async -> RevocationOutcome {
        guard let endpoint = try? await resolvedMetadata().revocationEndpoint else {
            logger.debug("no revocation endpoint; the tokens expire on their own", metadata: ["provider.id": "\(name)"])
            return .notOffered
        }
        do {
            let response = try await tokenEndpoint.post(endpoint, to: .revocation, Revocation.fields(tokens))
            // RFC 7009 §2.2: 200 whether or not the token was valid.
            guard response.status == 200 else {
                logger.notice("revocation refused", metadata: ["provider.id": "\(name)", "http.status": "\(response.status)"])
                return .refused(status: response.status)
            }
            return .revoked
        } catch {
            logger.notice("revocation failed", metadata: ["provider.id": "\(name)", "error.reason": "\(error.reason.rawValue)"])
            return .failed(error.reason)
        }
    }

    public func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] {
        guard let endpoint = try await resolvedMetadata().userinfoEndpoint else {
            throw AuthGateError(.unsupportedGrant, "\(name) has no userinfo endpoint.")
        }
        let response = try await get(endpoint, .userinfo, what: "userinfo request", bearer: tokens)
        // userinfo_claims first: a provider's own names for the standard claims.
        guard let answer = (try? JSONValue.parse(Data(response.body)))?.objectValue, case let claims = settings.quirks.standardizing(answer),
            claims["sub"]?.stringValue != nil
        else {
            throw ProviderFailure.malformed(name, what: "userinfo response", "it is not a JSON object with a sub")
        }
        return claims
    }

    /// Verifies any ID token and finds out who signed in.
    func signedIn(_ tokens: TokenSet) async throws(AuthGateError) -> SignInResult {
        if let idToken = tokens.idToken {
            let claims = try await verify(idToken, nonce: nil)
            return SignInResult(tokens: tokens, subject: claims.sub, displayName: claims.displayName)
        }
        // No ID token (common on the password grant): ask the userinfo endpoint, best effort.
        // userinfo_claims: an OAuth provider whose user endpoint says who it is (GitHub's /user).
        if (isOIDC && tokens.scopes.contains("openid")) || !settings.quirks.userinfoClaims.isEmpty, let claims = try? await userinfo(tokens) {
            return SignInResult(
                tokens: tokens,
                subject: claims["sub"]?.stringValue,
                displayName: SignInResult.displayName(
                    preferredUsername: claims["preferred_username"]?.stringValue,
                    email: claims["email"]?.stringValue,
                    name: claims["name"]?.stringValue
                )
            )
        }
        return SignInResult(tokens: tokens, subject: nil)
    }

    func verify(_ idToken: Secret, nonce: String?) async throws(AuthGateError) -> IDTokenClaims {
        let metadata = try await resolvedMetadata()
        let issuer = metadata.issuer ?? settings.issuer?.absoluteString ?? ""
        return try await verifier.verify(
            idToken,
            issuer: issuer,
            issuerTemplate: settings.quirks.issuerTemplate,
            clientID: settings.clientID,
            nonce: nonce,
            now: now()
        )
    }
}

/// Why discovery or a probe failed.
enum DiscoveryFailure: Error {
    /// Not reached, or it answered 5xx or nonsense: worth retrying.
    case unreachable(AuthGateError)
    /// It answered, but contradicts its file: not worth retrying until the file changes.
    case refused(String)
}
