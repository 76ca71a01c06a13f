import AuthGateCore
import AuthGateServer
import Synchronization

/// The ids of the providers that ``ProviderRegistry/usableProvider(_:for:)`` admits every
/// caller to: usable, without access rules and without consent (`access.confirm`), and the
/// ``CredentialRoutes`` through them.
/// Updated by the registry with every change of a provider, and read from any thread; a
/// provider with access rules is never in it, because the rules are decided per caller in the
/// registry.
final class OpenProviders: Sendable {
    private struct Published {
        var ids: Set<String> = []
        var routes: [CredentialRoutes.Key: CredentialRoutes.Route] = [:]
    }

    private let published = Mutex(Published())
    private let pinning = Atomic<Bool>(false)
    private let changes = Atomic<UInt64>(0)

    func update(_ providers: some Sequence<RegisteredProvider>) {
        let open = Set(
            providers.filter { provider in
                guard provider.status != .invalid, provider.client != nil, let configuration = provider.configuration else { return false }
                return configuration.access.admitsEveryone && !configuration.access.confirm
            }.map(\.id)
        )
        let routes = CredentialRoutes.routes(
            providers.compactMap { provider in
                provider.configuration?.credentialHelper.map { CredentialRoutes.Claim(provider: provider.id, helper: $0, open: open.contains(provider.id)) }
            }
        )
        published.withLock { $0 = Published(ids: open, routes: routes) }
        pinning.store(
            providers.contains { $0.configuration.map { $0.access.executables != nil || $0.access.confirm } ?? false },
            ordering: .releasing
        )
        changes.add(1, ordering: .releasing)
    }

    /// Counts the updates, each after it took effect (``RecentTokenAnswers``).
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Whether some provider has an `access.executables` rule or asks for consent: only then is
    /// a connecting process pinned (PeerCredentials), which costs /proc reads on every
    /// connection. (A session whose user chose consent at sign-in identifies its caller when
    /// it asks: ``ConsentKeeper``.)
    var pinsProcesses: Bool { pinning.load(ordering: .acquiring) }

    func contains(_ id: String) -> Bool {
        published.withLock { $0.ids.contains(id) }
    }

    /// The provider that answers `credential.get` for `host` and `tool` for every caller, if one does.
    func credentialRoute(host: String, tool: String) -> CredentialRoutes.Route? {
        guard let key = CredentialRoutes.key(host: host, tool: tool) else { return nil }
        return published.withLock { $0.routes[key] }
    }
}
