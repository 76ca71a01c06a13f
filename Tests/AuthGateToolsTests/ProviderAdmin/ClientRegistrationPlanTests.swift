import AuthGateCore
import AuthGateRPC
import AuthGateTools
import Testing

/// What `provider add --register` asks a provider for and keeps of its answer
/// (ClientRegistrationPlan), in process; the registration itself is tested against idpyoidc
/// (ProviderFileCommandTests+Registration).
@Suite("A client registration's plan (ClientRegistrationPlan)")
struct ClientRegistrationPlanTests {
    private func offer(device: Bool) -> ProviderOffer {
        ProviderOffer(
            issuer: "https://sso.example.com",
            tokenEndpoint: "https://sso.example.com/token",
            authorizationEndpoint: "https://sso.example.com/authorize",
            deviceAuthorizationEndpoint: device ? "https://sso.example.com/device" : nil,
            pushedAuthorizationRequestEndpoint: nil,
            requirePushedAuthorizationRequests: false,
            registrationEndpoint: "https://sso.example.com/register",
            grantTypes: nil,
            grants: device ? [.authorizationCode, .deviceCode] : [.authorizationCode],
            codeChallengeMethods: ["S256"],
            dpopSigningAlgs: [],
            tokenEndpointAuthMethods: [],
            scopes: []
        )
    }

    private func registration(granting grants: [String]?) -> ProviderRegistration {
        ProviderRegistration(
            clientID: "c1",
            clientSecret: nil,
            clientSecretExpiresAt: nil,
            registrationClientURI: nil,
            registrationAccessToken: nil,
            registrationEndpoint: "https://sso.example.com/register",
            grantTypes: grants,
            redirectURIs: nil,
            tokenEndpointAuthMethod: nil,
            scope: nil
        )
    }

    @Test("with no --grant: the browser sign-in, and the device code where the provider offers it with an endpoint")
    func defaultGrants() {
        #expect(ClientRegistrationPlan.defaultGrants(offer(device: true)) == [.authorizationCode, .deviceCode])
        #expect(ClientRegistrationPlan.defaultGrants(offer(device: false)) == [.authorizationCode])
    }

    @Test("a public client for user sign-ins, a confidential one for client credentials, private_key_jwt when asked; always the loopback redirect URI")
    func requests() {
        var draft = ProviderFileDraft()
        draft.grants = [.authorizationCode, .deviceCode]
        draft.scopes = ["openid", "email"]
        let id = ProviderID("corp")!
        let public_ = ClientRegistrationPlan(privateKeyJWT: false).request(draft, offer: offer(device: true), id: id, caFile: nil, initialAccessToken: "iat")
        #expect(public_.tokenEndpointAuthMethod == "none" && public_.redirectURIs == ["http://127.0.0.1/callback"])
        #expect(public_.scope == "openid email" && public_.clientName == "authgate (corp)" && public_.initialAccessToken == "iat")
        #expect(
            ClientRegistrationPlan(privateKeyJWT: false).summary(public_).hasPrefix(
                "a public client (token_endpoint_auth_method none) for authorization_code, device_code"
            )
        )

        draft.grants = [.clientCredentials]
        draft.scopes = []
        let confidential = ClientRegistrationPlan(privateKeyJWT: false).request(
            draft,
            offer: offer(device: false),
            id: id,
            caFile: "/ca.pem",
            initialAccessToken: nil
        )
        #expect(confidential.tokenEndpointAuthMethod == "client_secret_basic" && confidential.scope == nil && confidential.caFile == "/ca.pem")
        #expect(confidential.redirectURIs == ["http://127.0.0.1/callback"], "OpenID Connect registration requires redirect_uris")
        let keyed = ClientRegistrationPlan(privateKeyJWT: true)
        #expect(keyed.request(draft, offer: offer(device: false), id: id, caFile: nil, initialAccessToken: nil).tokenEndpointAuthMethod == "private_key_jwt")
        #expect(
            keyed.summary(keyed.request(draft, offer: offer(device: false), id: id, caFile: nil, initialAccessToken: nil)).hasPrefix(
                "a confidential client (private_key_jwt"
            )
        )
    }

    @Test("the draft is checked as it will be once registered: a placeholder id, the browser grant by default, the secret or key file the registration brings")
    func prepare() {
        var draft = ProviderFileDraft()
        ClientRegistrationPlan(privateKeyJWT: false).prepare(&draft, id: "corp", directory: "/etc/authgate/providers.d")
        #expect(draft.clientID == ClientRegistrationPlan.dryRunClientID && draft.grants == [.authorizationCode] && draft.clientSecretFile == nil)

        var service = ProviderFileDraft()
        service.grants = [.clientCredentials]
        ClientRegistrationPlan(privateKeyJWT: false).prepare(&service, id: "corp", directory: "/etc/authgate/providers.d")
        #expect(service.clientSecretFile == "/etc/authgate/providers.d/corp.client-secret" && service.clientAuth == nil)

        var keyed = ProviderFileDraft()
        keyed.grants = [.clientCredentials]
        ClientRegistrationPlan(privateKeyJWT: true).prepare(&keyed, id: "corp", directory: "/etc/authgate/providers.d")
        #expect(keyed.clientAuth == "private_key_jwt" && keyed.clientKeyFile == "/etc/authgate/providers.d/corp.key" && keyed.clientSecretFile == nil)
    }

    @Test(
        "grants the provider did not register are left out of the file, unless it registered none of those asked; an answer without grant_types keeps them all"
    )
    func granted() {
        let asked: [Grant] = [.authorizationCode, .deviceCode]
        let some = ClientRegistrationPlan.granted(asked, by: registration(granting: ["authorization_code", "refresh_token"]))
        #expect(some.kept == [.authorizationCode] && some.refused == [.deviceCode])
        let none = ClientRegistrationPlan.granted(asked, by: registration(granting: ["client_credentials"]))
        #expect(none.kept == asked && none.refused == asked)
        let unsaid = ClientRegistrationPlan.granted(asked, by: registration(granting: nil))
        #expect(unsaid.kept == asked && unsaid.refused.isEmpty)
    }
}
