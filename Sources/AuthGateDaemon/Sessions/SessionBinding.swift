import AuthGateCore

/// What a session needs from its provider: the client that refreshes it and the rules it
/// follows. Replaced when a reload changes the provider in a way that keeps its sessions.
///
/// An object, so that a provider's sessions share one (``SessionManager`` keeps the one in use
/// per provider, ``isInterchangeable(with:)``): inline, its ~100 bytes were in every session's
/// record (docs/BENCHMARKS.md, "Bytes per session").
final class SessionBinding: Sendable {
    let client: any IdentityProvider
    let policy: RefreshPolicy
    let storage: ProviderConfiguration.Storage
    let identity: ProviderIdentity

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

    convenience init(_ configuration: ProviderConfiguration, client: any IdentityProvider) {
        self.init(client: client, policy: configuration.refresh, storage: configuration.storage, identity: ProviderIdentity(configuration))
    }

    /// The same client object and the same rules: either may stand for the other. A client
    /// that is not an object (a test's value) is never the same as another.
    func isInterchangeable(with other: SessionBinding) -> Bool {
        let mine = client as AnyObject
        let theirs = other.client as AnyObject
        return mine === theirs && policy == other.policy && storage == other.storage && identity == other.identity
    }
}
