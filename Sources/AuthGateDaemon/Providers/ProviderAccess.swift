import AuthGateCore
import AuthGateServer
import Synchronization

/// Every provider's `access` rules as the registry holds them now, readable from any thread:
/// the watches ask it before every notification, so that a reload that narrows a provider's
/// access stops the tokens of those it no longer admits at once.
final class ProviderAccess: Sendable {
    /// By id: the rules of a provider with a valid file, `nil` for one whose file is invalid
    /// (its sessions are kept until the file is fixed or removed, so its watches go on too).
    private let rules = Mutex<[String: AccessRules?]>([:])
    private let policy = AccessPolicy()

    func update(_ providers: some Sequence<RegisteredProvider>) {
        var next: [String: AccessRules?] = [:]
        for provider in providers { next[provider.id] = .some(provider.configuration?.access) }
        rules.withLock { $0 = next }
    }

    /// Whether the provider `id` asks before a program gets a token of its sessions (`access.confirm`).
    func asksConsent(_ id: String) -> Bool {
        rules.withLock { $0[id] }??.confirm ?? false
    }

    /// Whether `caller` may use the provider `id` now; false for a provider that is gone.
    func admits(_ caller: PeerCredentials, to id: String) -> Bool {
        guard let entry = rules.withLock({ $0[id] }) else { return false }
        guard let rules = entry else { return true }
        return policy.admits(caller, rules)
    }
}
