import AuthGateCore

/// What a session needs from its provider: the client that refreshes it and the rules it
/// follows. Replaced when a reload changes the provider in a way that keeps its sessions.
struct SessionBinding: Sendable {
    var client: any IdentityProvider
    var policy: RefreshPolicy
    var storage: ProviderConfiguration.Storage
    var identity: ProviderIdentity

    init(
        client: any IdentityProvider,
        policy: RefreshPolicy,
        storage: ProviderConfiguration.Storage,
        identity: ProviderIdentity = ProviderIdentity(issuer: nil, clientID: nil)
    ) {
        self.client = client
        self.policy = policy
        self.storage = storage
        self.identity = identity
    }

    init(_ configuration: ProviderConfiguration, client: any IdentityProvider) {
        self.init(client: client, policy: configuration.refresh, storage: configuration.storage, identity: ProviderIdentity(configuration))
    }
}
