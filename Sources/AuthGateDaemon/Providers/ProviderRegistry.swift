import AuthGateCore
import AuthGateOAuth
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
    /// The same client when it talks to a real server and so needs network validation.
    var remote: RemoteIdentityProvider?

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

    /// Takes the outcome of a network check.
    mutating func apply(_ validation: ProviderValidation) {
        switch validation.outcome {
        case .ready: status = .ready
        case .unreachable: status = .unreachable
        case .invalid: status = .invalid
        }
        statusReason = validation.reason
    }

    /// Turns a file's outcome into a provider: the mock is ready at once; `oidc` and `oauth2`
    /// stay `unchecked` until their endpoints have been checked over the network.
    static func make(_ report: ProviderFileReport, now: @escaping @Sendable () -> Date, logger: Logger) -> RegisteredProvider {
        guard let configuration = report.configuration else {
            let problems = report.problems.map { "\($0.path): \($0.message)" }.joined(separator: "; ")
            return RegisteredProvider(report: report, status: .invalid, statusReason: "\(report.file): \(problems)")
        }
        switch configuration.settings {
        case .mock(let settings):
            let client = MockIdentityProvider(settings: settings, defaultScopes: configuration.scopes, now: now)
            return RegisteredProvider(report: report, status: .ready, client: client)
        case .oidc, .oauth2:
            do {
                let remote = try RemoteIdentityProvider(configuration: configuration, now: now, logger: logger)
                return RegisteredProvider(report: report, status: .unchecked, statusReason: "its endpoints are being checked",
                                          client: remote, remote: remote)
            } catch {
                return RegisteredProvider(report: report, status: .invalid, statusReason: error.message)
            }
        }
    }
}

/// The providers loaded from `providers.d`, and who may use which.
actor ProviderRegistry {
    private var providers: [String: RegisteredProvider] = [:]
    private let accessPolicy = AccessPolicy()

    init(_ providers: [RegisteredProvider]) {
        for provider in providers {
            self.providers[provider.id] = provider
        }
    }

    /// Every provider the caller may see, sorted by id.
    func visible(to caller: PeerCredentials) -> [RegisteredProvider] {
        providers.values.filter { provider in
            provider.configuration.map { accessPolicy.admits(caller, $0.access) } ?? true
        }.sorted { $0.id < $1.id }
    }

    /// The providers whose endpoints must be checked over the network.
    var remoteProviders: [(id: String, remote: RemoteIdentityProvider)] {
        providers.values.compactMap { provider in provider.remote.map { (provider.id, $0) } }.sorted { $0.id < $1.id }
    }

    /// What sessions of each usable provider are bound to; for restoring saved sessions.
    var sessionBindings: [ProviderID: SessionBinding] {
        var bindings: [ProviderID: SessionBinding] = [:]
        for provider in providers.values {
            if let configuration = provider.configuration, let client = provider.client {
                bindings[configuration.id] = SessionBinding(configuration, client: client)
            }
        }
        return bindings
    }

    /// True when some provider keeps its sessions on disk.
    var hasPersistentProviders: Bool {
        providers.values.contains { $0.configuration?.storage == .persistent }
    }

    /// Records the outcome of a network check.
    func record(_ validation: ProviderValidation, for id: String) {
        providers[id]?.apply(validation)
    }

    /// The provider `id` with a client the caller may use.
    ///
    /// A provider that is `unchecked` or `unreachable` is still tried: the attempt itself says
    /// precisely what is wrong (`network_error`, `service_unavailable`, …).
    /// - Throws: `unknown_provider`, `permission_denied` or `provider_unavailable`.
    func usableProvider(_ id: String, for caller: PeerCredentials) throws(AuthGateError) -> (ProviderConfiguration, any IdentityProvider) {
        guard let provider = providers[id] else { throw .unknownProvider(id) }
        if let configuration = provider.configuration, !accessPolicy.admits(caller, configuration.access) {
            throw AuthGateError(.permissionDenied, "You are not allowed to use the provider '\(id)'.")
        }
        guard provider.status != .invalid, let configuration = provider.configuration, let client = provider.client else {
            throw AuthGateError(.providerUnavailable, "The provider '\(id)' cannot be used: \(provider.statusReason ?? provider.status.rawValue).")
        }
        return (configuration, client)
    }
}
