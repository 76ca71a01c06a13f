import AuthGateCore
import AuthGateRPC
import Foundation
import Logging

/// One provider as the daemon knows it: its file's outcome, its status and, when it can sign
/// people in, its client.
struct RegisteredProvider: Sendable {
    var report: ProviderFileReport
    var status: ProviderStatus
    /// Why it is not `ready`, for a person.
    var statusReason: String?
    var client: (any IdentityProvider)?

    var id: String { report.id }
    var configuration: ProviderConfiguration? { report.configuration }

    var info: ProviderInfo {
        let configuration = configuration
        return ProviderInfo(
            id: id, displayName: configuration?.displayName ?? id, type: configuration?.kind.rawValue,
            status: status, statusReason: statusReason, grants: configuration?.grants ?? [],
            registration: configuration.map { if case .mock(let mock) = $0.settings { mock.allowRegistration } else { false } } ?? false,
            storage: configuration?.storage.rawValue)
    }
}

/// The providers loaded from `providers.d`, and who may use which.
actor ProviderRegistry {
    private var providers: [String: RegisteredProvider] = [:]
    private let accessPolicy = AccessPolicy()
    private let now: @Sendable () -> Date

    init(reports: [ProviderFileReport], now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
        for report in reports {
            providers[report.id] = Self.register(report, now: now)
        }
    }

    /// Turns a file's outcome into a provider: the mock is ready at once; `oidc` and `oauth2`
    /// wait for network validation, which this version does not perform.
    private static func register(_ report: ProviderFileReport, now: @escaping @Sendable () -> Date) -> RegisteredProvider {
        guard let configuration = report.configuration else {
            let problems = report.problems.map { "\($0.path): \($0.message)" }.joined(separator: "; ")
            return RegisteredProvider(report: report, status: .invalid, statusReason: "\(report.file): \(problems)", client: nil)
        }
        switch configuration.settings {
        case .mock(let settings):
            let client = MockIdentityProvider(settings: settings, defaultScopes: configuration.scopes, now: now)
            return RegisteredProvider(report: report, status: .ready, statusReason: nil, client: client)
        case .oidc, .oauth2:
            return RegisteredProvider(
                report: report, status: .unchecked,
                statusReason: "the file is valid, but this version of authgated cannot yet check or sign in to \(configuration.kind.rawValue) providers",
                client: nil)
        }
    }

    /// Every provider the caller may see, sorted by id.
    func visible(to caller: PeerCredentials) -> [RegisteredProvider] {
        providers.values.filter { provider in
            provider.configuration.map { accessPolicy.admits(caller, $0.access) } ?? true
        }.sorted { $0.id < $1.id }
    }

    /// The provider `id` with a client the caller may use.
    /// - Throws: `unknown_provider`, `permission_denied` or `provider_unavailable`.
    func usableProvider(_ id: String, for caller: PeerCredentials) throws(AuthGateError) -> (ProviderConfiguration, any IdentityProvider) {
        guard let provider = providers[id] else { throw .unknownProvider(id) }
        if let configuration = provider.configuration, !accessPolicy.admits(caller, configuration.access) {
            throw AuthGateError(.permissionDenied, "You are not allowed to use the provider '\(id)'.")
        }
        guard let configuration = provider.configuration, let client = provider.client else {
            throw AuthGateError(.providerUnavailable, "The provider '\(id)' cannot be used: \(provider.statusReason ?? provider.status.rawValue).")
        }
        return (configuration, client)
    }

    var count: Int { providers.count }
}
