package import AuthGateCore
package import AuthGateRPC

/// What `authgate provider add --register` asks the provider for (RFC 7591, through the daemon)
/// and what it makes of the answer: the grants, how the client authenticates, the request, a
/// sentence for a person, and the grants the provider did not register. The command calls the
/// daemon, writes the files (``RegisteredClientFiles``) and prints; this decides (tested in
/// process).
package struct ClientRegistrationPlan {
    /// The client id a `--dry-run` file shows: no client is registered then.
    package static let dryRunClientID = "registered-by-provider-add"

    /// The redirect URI of the daemon's browser sign-in (its loopback listener), registered
    /// without a port: RFC 8252 §7.3 lets the server match it on any port, which the daemon
    /// picks per sign-in.
    package static let loopbackRedirectURI = "http://127.0.0.1/callback"

    /// `--private-key-jwt`: a confidential client with a key the daemon generates.
    package var privateKeyJWT: Bool

    package init(privateKeyJWT: Bool) {
        self.privateKeyJWT = privateKeyJWT
    }

    /// The grants to register when none are given: the browser sign-in, and the device code
    /// grant when the provider offers it.
    package static func defaultGrants(_ offer: ProviderOffer) -> [Grant] {
        [.authorizationCode] + (offer.deviceAuthorizationEndpoint != nil && offer.grants.contains(.deviceCode) ? [.deviceCode] : [])
    }

    /// The draft as it will be once registered, so that it is checked before the provider
    /// assigns a client id and before its discovery document says which grants it offers: a
    /// placeholder id and the browser grant, and for the client credentials grant the client
    /// authentication the registration brings (the generated key, else the secret a
    /// confidential client is issued), in `directory` (absolute).
    package func prepare(_ draft: inout ProviderFileDraft, id: String, directory: String) {
        draft.clientID = Self.dryRunClientID
        if draft.grants.isEmpty { draft.grants = [.authorizationCode] }
        guard draft.grants.contains(.clientCredentials) else { return }
        if privateKeyJWT {
            draft.clientAuth = "private_key_jwt"
            draft.clientKeyFile = ProviderFileStore.clientKeyPath(id: id, directory: directory)
            draft.clientKeyID = Self.dryRunClientID
        } else {
            draft.clientSecretFile = ProviderFileStore.clientSecretPath(id: id, directory: directory)
        }
    }

    /// How the client registered for `grants` authenticates: `private_key_jwt` with
    /// `--private-key-jwt`, a confidential client with a secret for the client credentials grant
    /// (a public client cannot use it), else a public client.
    package func authMethod(for grants: [Grant]) -> String {
        privateKeyJWT ? "private_key_jwt" : grants.contains(.clientCredentials) ? "client_secret_basic" : "none"
    }

    /// The registration request for `draft`'s grants and scopes at `offer`'s issuer.
    package func request(
        _ draft: ProviderFileDraft,
        offer: ProviderOffer,
        id: ProviderID,
        caFile: String?,
        initialAccessToken: String?
    ) -> ProviderRegisterParams {
        ProviderRegisterParams(
            issuer: offer.issuer,
            caFile: caFile,
            grants: draft.grants,
            // Also for a client without the authorization code grant: OpenID Connect Dynamic
            // Client Registration 1.0 §2 makes redirect_uris REQUIRED (idpyoidc refuses a
            // registration without), where RFC 7591 §2 asks it only of redirect-based flows.
            redirectURIs: [Self.loopbackRedirectURI],
            tokenEndpointAuthMethod: authMethod(for: draft.grants),
            clientName: "authgate (\(id.rawValue))",
            scope: draft.scopes.isEmpty ? nil : draft.scopes.joined(separator: " "),
            initialAccessToken: initialAccessToken
        )
    }

    /// The client `request` asks for, in words.
    package func summary(_ request: ProviderRegisterParams) -> String {
        (privateKeyJWT
            ? "a confidential client (private_key_jwt, a new ES256 key)"
            : request.tokenEndpointAuthMethod == "none"
                ? "a public client (token_endpoint_auth_method none)" : "a confidential client (client_secret_basic: the provider issues a secret)")
            + " for \(request.grants.map(\.rawValue).joined(separator: ", "))"
            + (request.redirectURIs.isEmpty ? "" : " with the redirect URI \(request.redirectURIs.joined(separator: ", "))")
    }

    /// The grants asked for that the provider did not register (RFC 7591 §3.2.1 answers what it
    /// registered), and the grants the file keeps: only those it registered, so that no
    /// sign-in is offered that would fail — unless it registered none of them, when the file
    /// keeps them all (and the command says sign-ins may be refused).
    package static func granted(_ asked: [Grant], by registration: ProviderRegistration) -> (kept: [Grant], refused: [Grant]) {
        let refused = registration.grantTypes.map { registered in asked.filter { !registered.contains($0.wireName) } } ?? []
        guard !refused.isEmpty, refused.count < asked.count else { return (asked, refused) }
        return (asked.filter { !refused.contains($0) }, refused)
    }
}
