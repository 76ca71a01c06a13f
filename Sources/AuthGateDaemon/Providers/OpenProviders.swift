import AuthGateCore
import Synchronization

/// The ids of the providers that ``ProviderRegistry/usableProvider(_:for:)`` admits every
/// caller to: usable and without access rules. Updated by the registry with every change of a
/// provider, and read from any thread; a provider with access rules is never in it, because
/// the rules are decided per caller in the registry.
final class OpenProviders: Sendable {
    private let ids = Mutex<Set<String>>([])
    private let executableRules = Atomic<Bool>(false)
    private let changes = Atomic<UInt64>(0)

    func update(_ providers: some Sequence<RegisteredProvider>) {
        let open = providers.filter { provider in
            guard provider.status != .invalid, provider.client != nil, let configuration = provider.configuration else { return false }
            return configuration.access.admitsEveryone
        }
        ids.withLock { $0 = Set(open.map(\.id)) }
        executableRules.store(providers.contains { $0.configuration?.access.executables != nil }, ordering: .releasing)
        changes.add(1, ordering: .releasing)
    }

    /// Counts the updates, each after it took effect (``RecentTokenAnswers``).
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Whether some provider has an `access.executables` rule: only then is a connecting
    /// process pinned (PeerCredentials), which costs /proc reads on every connection.
    var anyExecutableRule: Bool { executableRules.load(ordering: .acquiring) }

    func contains(_ id: String) -> Bool {
        ids.withLock { $0.contains(id) }
    }
}
