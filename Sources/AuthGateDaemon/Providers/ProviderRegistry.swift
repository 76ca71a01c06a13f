import AuthGateCore
import AuthGateHTTP
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import Synchronization

/// One provider as the daemon knows it: its file's outcome, its status and, when it can sign
/// people in, its client.
struct RegisteredProvider: Sendable {
    /// Who signs people in for a usable provider: the in-memory mock, or a real server's client,
    /// whose endpoints need checking over the network.
    enum Backend: Sendable {
        case mock(MockIdentityProvider)
        case remote(RemoteIdentityProvider)
    }

    var report: ProviderFileReport
    var status: ProviderStatus
    /// Why it is not `ready`, for a person.
    var statusReason: String?
    /// `nil` when its file is unusable.
    var backend: Backend?

    /// The client, whichever kind it is.
    var client: (any IdentityProvider)? {
        switch backend {
        case .mock(let mock): mock
        case .remote(let remote): remote
        case nil: nil
        }
    }

    /// The client when it talks to a real server, and so needs network validation.
    var remote: RemoteIdentityProvider? {
        guard case .remote(let remote) = backend else { return nil }
        return remote
    }

    var id: String { report.id }
    var configuration: ProviderConfiguration? { report.configuration }

    /// True when `other` comes from an identical file (and the same bytes in every file it trusts), so that a
    /// reload can leave this one, its status and its sessions untouched.
    func hasSameDefinition(as other: RegisteredProvider) -> Bool {
        guard report.file == other.report.file, report.configuration == other.report.configuration,
            report.problems == other.report.problems
        else { return false }
        switch (remote, other.remote) {
        case (let mine?, let theirs?): return mine.hasSameTrustedFiles(as: theirs)
        case (nil, nil): return statusReason == other.statusReason
        default: return false
        }
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
    /// - Parameter metrics: Where a real provider's HTTP requests are counted and timed.
    static func make(
        _ report: ProviderFileReport,
        now: @escaping @Sendable () -> Date = { Date() },
        metrics: (any ProviderRequestObserver)? = nil,
        logger: Logger
    ) -> RegisteredProvider {
        guard let configuration = report.configuration else {
            let problems = report.problems.map { "\($0.path): \($0.message)" }.joined(separator: "; ")
            return RegisteredProvider(report: report, status: .invalid, statusReason: "\(report.file): \(problems)")
        }
        switch configuration.settings {
        case .mock(let settings):
            let client = MockIdentityProvider(settings: settings, defaultScopes: configuration.scopes, now: now)
            return RegisteredProvider(report: report, status: .ready, backend: .mock(client))
        case .oidc, .oauth2:
            do {
                let transport: any HTTPTransport =
                    metrics.map { MeasuredTransport(inner: CurlTransport(), provider: report.id, metrics: $0) }
                    ?? CurlTransport()
                let remote = try RemoteIdentityProvider(configuration: configuration, transport: transport, now: now, logger: logger)
                return RegisteredProvider(
                    report: report,
                    status: .unchecked,
                    statusReason: "its endpoints are being checked",
                    backend: .remote(remote)
                )
            } catch {
                return RegisteredProvider(report: report, status: .invalid, statusReason: error.message)
            }
        }
    }
}

/// The providers loaded from `providers.d`, and who may use which.
actor ProviderRegistry {
    private var providers: [String: RegisteredProvider] = [:] {
        didSet {
            openProviders.update(providers.values)
            access.update(providers.values)
        }
    }
    private let accessPolicy = AccessPolicy()
    /// Which providers anyone may use right now, for answering `token` without the dispatcher.
    nonisolated let openProviders = OpenProviders()
    /// Who may use which provider now, for the watches' notifications.
    nonisolated let access = ProviderAccess()

    init(_ providers: [RegisteredProvider]) {
        for provider in providers {
            self.providers[provider.id] = provider
        }
        openProviders.update(self.providers.values)
        access.update(self.providers.values)
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

    /// The providers whose file is there but cannot be used now (invalid, or its client could
    /// not be made: a secret missing): their saved sessions are kept, not dropped.
    var unusableProviders: Set<ProviderID> {
        Set(providers.values.filter { $0.configuration == nil || $0.client == nil }.compactMap { ProviderID($0.id) })
    }

    /// True when some provider keeps its sessions on disk.
    var hasPersistentProviders: Bool {
        providers.values.contains { $0.configuration?.storage == .persistent }
    }

    /// Records the outcome of a network check of `remote`.
    /// - Returns: False when `remote` is no longer the provider's client (a reload replaced
    ///   it), so that its checks stop.
    @discardableResult
    func record(_ validation: ProviderValidation, for id: String, remote: RemoteIdentityProvider) -> Bool {
        guard providers[id]?.remote === remote else { return false }
        providers[id]?.apply(validation)
        return true
    }

    /// One provider's change in a reload, with its registration before and after.
    struct Change: Sendable {
        var id: String
        var kind: ProviderChange
        var previous: RegisteredProvider?
        var current: RegisteredProvider?
    }

    /// Replaces the providers with `incoming` (a reload). Providers from identical files are
    /// kept as they are, status included.
    /// - Returns: What happened to each provider, sorted by id.
    func replace(with incoming: [RegisteredProvider]) -> [Change] {
        var next: [String: RegisteredProvider] = [:]
        var changes: [Change] = []
        for provider in incoming {
            if let old = providers[provider.id] {
                if old.hasSameDefinition(as: provider) {
                    next[provider.id] = old
                    changes.append(Change(id: provider.id, kind: .unchanged, previous: old, current: old))
                } else {
                    next[provider.id] = provider
                    changes.append(Change(id: provider.id, kind: .changed, previous: old, current: provider))
                }
            } else {
                next[provider.id] = provider
                changes.append(Change(id: provider.id, kind: .added, current: provider))
            }
        }
        for old in providers.values where next[old.id] == nil {
            changes.append(Change(id: old.id, kind: .removed, previous: old))
        }
        providers = next
        return changes.sorted { $0.id < $1.id }
    }

    /// Every provider's id and status, sorted by id; for the metrics and `/readyz`.
    func statuses() -> [(id: String, status: ProviderStatus)] {
        providers.values.map { ($0.id, $0.status) }.sorted { $0.id < $1.id }
    }

    /// The provider `id` as registered now.
    func provider(_ id: String) -> RegisteredProvider? {
        providers[id]
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
