import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import FoundationEssentials
import Logging

/// Live reload (SIGHUP and `config.reload`): reads `providers.d` again and applies the
/// difference.
///
/// - Added providers appear and are validated.
/// - Removed ones go, and their sessions are signed out (revoked where the provider can).
/// - Sign-ins under way at a removed or changed provider end (`endSignIns`: the daemon's
///   interactive flows), before anything else is done for it.
/// - Changed ones are validated again; their sessions are kept when the issuer and client
///   are the same, else signed out. A file that became invalid keeps its sessions (and
///   their refreshes) until it is fixed or removed, so that a typo signs nobody out.
/// - Unchanged ones are left alone, sessions and status included.
///
/// Reloads run one at a time, in the order they were asked for.
actor ProviderReloader {
    private let directory: String
    private let registry: ProviderRegistry
    private let sessions: SessionManager
    private let validator: ProviderValidator
    private let notifier: SystemdNotifier
    /// Where the new providers' requests are counted and timed.
    private let metrics: (any ProviderRequestObserver)?
    /// Ends the pending interactive sign-ins of a provider.
    private let endSignIns: @Sendable (ProviderID) async -> Void
    private let logger: Logger
    private var last: Task<Result<[ProviderRegistry.Change], AuthGateError>, Never>?

    init(
        directory: String,
        registry: ProviderRegistry,
        sessions: SessionManager,
        validator: ProviderValidator,
        notifier: SystemdNotifier = SystemdNotifier(environment: [:]),
        metrics: (any ProviderRequestObserver)? = nil,
        endSignIns: @escaping @Sendable (ProviderID) async -> Void = { _ in },
        logger: Logger
    ) {
        self.endSignIns = endSignIns
        self.notifier = notifier
        self.metrics = metrics
        self.directory = directory
        self.registry = registry
        self.sessions = sessions
        self.validator = validator
        self.logger = logger
    }

    /// Reloads, after any reload already running.
    /// - Returns: Each provider's change, with its registration as it is after its endpoints
    ///   were checked.
    func reload() async throws(AuthGateError) -> [ProviderRegistry.Change] {
        let previous = last
        let task = Task { () -> Result<[ProviderRegistry.Change], AuthGateError> in
            _ = await previous?.value
            // systemd shows the service as "reloading" meanwhile (Type=notify).
            self.notifier.reloading()
            defer { self.notifier.ready() }
            do throws(AuthGateError) {
                return .success(try await self.perform())
            } catch {
                return .failure(error)
            }
        }
        last = task
        return try await task.value.get()
    }

    private func perform() async throws(AuthGateError) -> [ProviderRegistry.Change] {
        let reports: [ProviderFileReport]
        do {
            reports = try ProviderConfigurationLoader.load(directory: directory)
        } catch {
            logger.error("reload failed; the providers stay as they were", metadata: ["error": "\(error)"])
            throw AuthGateError(.internalError, "The providers directory cannot be read, so nothing was reloaded: \(error)")
        }
        ProviderReports.log(reports, directory: directory, logger: logger)
        let changes = await registry.replace(with: reports.map { RegisteredProvider.make($0, metrics: metrics, logger: logger) })

        var revocations: [(TokenSet, any IdentityProvider)] = []
        for change in changes {
            guard let id = ProviderID(change.id) else { continue }
            // Sign-ins under way were begun with what the provider was: they end first, and one
            // whose answer is on its way (a password sign-in's, a flow not yet registered) is
            // not stored when it comes with the old client.
            if change.kind == .removed || change.kind == .changed {
                if let client = change.previous?.client { await sessions.retire(client) }
                await endSignIns(id)
            }
            switch change.kind {
            case .removed:
                revocations += await sessions.removeAll(provider: id)
                await sessions.takeBackHeld(provider: id, binding: nil)
            case .changed, .added:
                if let configuration = change.current?.configuration, let client = change.current?.client {
                    let policy = AccessPolicy()
                    let rules = configuration.access
                    let binding = SessionBinding(configuration, client: client)
                    if change.kind == .changed {
                        revocations += await sessions.rebind(provider: id, to: binding) { uid in policy.admitsUser(uid: uid, rules) }
                    }
                    // Saved sessions kept on disk while the file could not be used come back.
                    await sessions.takeBackHeld(provider: id, binding: binding) { uid in policy.admitsUser(uid: uid, rules) }
                }
            case .unchanged:
                break
            }
        }
        await validate(changes.filter { $0.kind == .added || $0.kind == .changed })
        // Best effort, like logout: the sessions are gone locally whatever the providers say.
        await withDiscardingTaskGroup { group in
            for (tokens, client) in revocations {
                group.addTask { await client.revoke(tokens) }
            }
        }

        var result = changes
        for index in result.indices {
            result[index].current = await registry.provider(result[index].id)
        }
        let counts = [ProviderChange.added, .removed, .changed, .unchanged].map { kind in
            "\(changes.count { $0.kind == kind }) \(kind.rawValue)"
        }
        logger.notice(
            "providers reloaded: \(counts.joined(separator: ", "))",
            metadata: ["sessions.signed_out": "\(revocations.count)"]
        )
        return result
    }

    /// Checks the new and changed remote providers now, all at once, so that the report says
    /// how they are; unreachable ones are then retried in the background.
    private func validate(_ changes: [ProviderRegistry.Change]) async {
        await withDiscardingTaskGroup { group in
            for change in changes {
                guard let remote = change.current?.remote else { continue }
                group.addTask {
                    let validation = await remote.validate()
                    guard await self.registry.record(validation, for: change.id, remote: remote) else { return }
                    ProviderValidator.log(validation, id: change.id, logger: self.logger)
                    if validation.outcome == .unreachable {
                        self.validator.retryInBackground(change.id, remote)
                    }
                }
            }
        }
    }
}

/// Logging of what the provider files say, at start-up and on reload.
enum ProviderReports {
    static func log(_ reports: [ProviderFileReport], directory: String, logger: Logger) {
        if reports.isEmpty {
            logger.warning("no provider files (*.json) found", metadata: ["providers.directory": "\(directory)"])
        }
        for report in reports {
            for warning in report.warnings {
                logger.warning("\(warning)", metadata: ["provider.id": "\(report.id)"])
            }
            switch report.outcome {
            case .valid(let configuration):
                logger.info(
                    "provider loaded",
                    metadata: [
                        "provider.id": "\(report.id)", "provider.type": "\(configuration.kind.rawValue)",
                        "provider.file": "\(report.file)",
                    ]
                )
            case .invalid(let problems):
                for problem in problems {
                    logger.error("provider invalid: \(problem)", metadata: ["provider.id": "\(report.id)"])
                }
            }
        }
    }
}
