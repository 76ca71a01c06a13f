import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
public import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// The composition root: loads the providers, wires the services, runs them until a signal.
public enum Daemon {
    /// Exit statuses of `authgated`.
    public enum ExitStatus: Int32 {
        case success = 0
        /// A provider is not ready (`--check`), or a file is invalid at start-up under `--strict`.
        case providerProblems = 1
        /// The providers directory or the socket cannot be used.
        case setupFailed = 2
    }

    /// `--check`: validates the providers (files, then endpoints over the network, all at
    /// once), prints the report, and says how it went: like `nginx -t`.
    public static func check(_ configuration: DaemonConfiguration, logger: Logger) async -> (report: String, status: ExitStatus) {
        let reports: [ProviderFileReport]
        do {
            reports = try ProviderConfigurationLoader.load(directory: configuration.providersDirectory)
        } catch {
            return ("error: \(error)\n", .setupFailed)
        }
        var providers = reports.map { RegisteredProvider.make($0, logger: logger) }
        var networkWarnings: [Int: [String]] = [:]
        await withTaskGroup(of: (Int, ProviderValidation).self) { group in
            for (index, provider) in providers.enumerated() {
                if let remote = provider.remote { group.addTask { (index, await remote.validate()) } }
            }
            for await (index, validation) in group {
                providers[index].apply(validation)
                networkWarnings[index] = validation.warnings
            }
        }
        var lines: [String] = []
        let width = max(8, providers.map(\.id.count).max() ?? 0)
        for (index, provider) in providers.enumerated() {
            let id = provider.id.padded(to: width)
            let state = provider.status.rawValue.padded(to: 11)
            lines.append("\(id)  \(state)  \(provider.report.file)")
            if provider.report.problems.isEmpty, let reason = provider.statusReason {
                lines.append("    error: \(reason)")
            }
            lines += provider.report.problems.map { "    error: \($0)" }
            lines += provider.report.warnings.map { "    warning: \($0)" }
            lines += (networkWarnings[index] ?? []).map { "    warning: \(provider.report.file): \($0)" }
        }
        let counts = ProviderStatus.allCases.compactMap { status -> String? in
            let count = providers.filter { $0.status == status }.count
            return count == 0 ? nil : "\(count) \(status.rawValue)"
        }
        lines.append(
            "\(providers.count) provider\(providers.count == 1 ? "" : "s") in \(configuration.providersDirectory)"
                + (counts.isEmpty ? "" : ": " + counts.joined(separator: ", "))
        )
        let allGood = providers.allSatisfy { $0.status == .ready }
        return (lines.joined(separator: "\n") + "\n", allGood ? .success : .providerProblems)
    }

    /// Runs the daemon until SIGTERM or SIGINT.
    /// - Returns: The process's exit status.
    public static func run(_ configuration: DaemonConfiguration, logger: Logger) async -> ExitStatus {
        // Everything the daemon creates is private unless it says otherwise (socket, state).
        umask(0o077)
        // SIGHUP's default action ends the process: ignored until the reload service's trap
        // (below, registered before the socket serves) takes it.
        signal(SIGHUP, SIG_IGN)
        for problem in ProcessHardening.apply() {
            logger.warning("\(problem)")
        }
        let notifier = SystemdNotifier()
        // Read (and cleared from the environment) before anything could spawn a child.
        let passed = SystemdSocketActivation.passedDescriptors()
        let (inheritedSocket, inheritedMetricsSocket) = (passed.rpc, passed.metrics)
        let reports: [ProviderFileReport]
        do {
            reports = try ProviderConfigurationLoader.load(directory: configuration.providersDirectory)
        } catch {
            logger.critical("cannot load providers", metadata: ["error": "\(error)"])
            return .setupFailed
        }
        ProviderReports.log(reports, directory: configuration.providersDirectory, logger: logger)
        if configuration.strict, reports.contains(where: { $0.configuration == nil }) {
            logger.critical("refusing to start: a provider file is invalid and --strict is set")
            return .providerProblems
        }

        let metrics = configuration.keepsMetrics ? DaemonMetrics() : nil
        let registry = ProviderRegistry(reports.map { RegisteredProvider.make($0, metrics: metrics, logger: logger) })
        let persistence = SessionPersistence(
            keeper: StorageKeyKeeper(
                stateDirectory: configuration.stateDirectory,
                credentialsDirectory: configuration.credentialsDirectory,
                choice: configuration.keyStore,
                mode: configuration.mode,
                environment: configuration.environment
            ),
            logger: logger
        )
        let signInNotifier = configuration.notify ? SignInNotifier.find(environment: configuration.environment, logger: logger) : nil
        let consent = ConsentKeeper(
            directory: configuration.stateDirectory,
            asker: ConsentKeeper.findAsker(environment: configuration.environment),
            timeout: configuration.consentTimeout,
            logger: logger
        )
        let broadcast = SessionBroadcast(access: registry.access, notifier: signInNotifier, consent: consent)
        let sessions = SessionManager(
            logger: logger,
            persistence: persistence,
            maximumSessionsPerUser: configuration.maximumSessionsPerUser,
            metrics: metrics,
            observer: broadcast
        )
        // A provider whose file cannot be used now may be a persistent one: its saved sessions
        // are read, and kept on disk until the file is fixed.
        let unusable = await registry.unusableProviders
        if await registry.hasPersistentProviders || (!unusable.isEmpty && !persistence.uidsWithSavedSessions.isEmpty) {
            await restoreSessions(sessions, from: persistence, registry: registry, unusable: unusable, notifier: signInNotifier, logger: logger)
        }
        // An older consent.json kept the sessions' choices: they move into the sessions' records.
        for key in consent.takeEarlierChoices() { await sessions.askConsent(key) }
        // Memory-only sessions of the run before a restart, from systemd's descriptor store.
        switch SessionHandover.take(passed.stored, notifier: notifier) {
        case .success(let entries)?:
            let taken = await sessions.takeHandedOver(entries, bindings: registry.sessionBindings)
            logger.notice("memory sessions taken back from systemd's descriptor store", metadata: ["sessions.restored": "\(taken)"])
        case .failure(let refused)?:
            logger.warning("memory sessions passed by systemd refused; starting without them: \(refused)")
        case nil:
            break
        }
        let context = DaemonContext(
            configDirectory: configuration.providersDirectory,
            mode: configuration.mode,
            socketPath: configuration.socketPath,
            adminGroup: configuration.adminGroup,
            servesAdmin: configuration.servesAdmin
        )
        let validator = ProviderValidator(registry: registry, logger: logger)
        let flows = LoginFlowManager(sessions: sessions, settings: configuration.loginFlows, metrics: metrics, logger: logger)
        let reloader = ProviderReloader(
            directory: configuration.providersDirectory,
            registry: registry,
            sessions: sessions,
            validator: validator,
            notifier: notifier,
            metrics: metrics,
            endSignIns: { await flows.endSignIns(provider: $0) },
            logger: logger
        )
        let connections = OpenConnections()
        let readiness = Readiness()
        let exposition = metrics.map {
            MetricsExposition(metrics: $0, registry: registry, sessions: sessions, flows: flows, connections: connections, readiness: readiness)
        }
        let listensForMetrics = configuration.metricsAddress != nil || inheritedMetricsSocket != nil
        let metricsListenerStatus = exposition != nil && listensForMetrics ? MetricsListenerStatus() : nil
        let firstUse = FirstUseSignIns(counted: { [metrics] provider, outcome in metrics?.firstUseSignIn(provider: provider, outcome: outcome) })
        let methods = MethodHandlers(
            registry: registry,
            sessions: sessions,
            flows: flows,
            reloader: reloader,
            context: context,
            broadcast: broadcast,
            firstUse: firstUse,
            consent: consent,
            metrics: metrics,
            exposition: exposition,
            metricsListener: metricsListenerStatus,
            persistence: persistence,
            logger: logger
        )
        if let signInNotifier {
            signInNotifier.setStarter(
                DesktopSignIn(
                    registry: registry,
                    desktop: signInNotifier.desktop,
                    begin: { [signIn = methods.signIn] params, owner async throws(AuthGateError) in
                        try await signIn.loginBegin(params, from: MethodCaller(credentials: owner))
                    },
                    logger: logger
                )
            )
        }
        let dispatcher = RPCDispatcher(methods: methods, metrics: metrics, logger: logger)
        // Ready once the socket serves: providers are loaded, network checks go on in the background.
        // The fast path's read side: published tokens of providers open to everyone.
        let answers = CachedTokenAnswers(tokens: broadcast.published, providers: registry.openProviders, metrics: metrics)
        let server = RPCServer(
            socketPath: configuration.socketPath,
            socketGroup: configuration.socketGroup,
            inheritedSocket: inheritedSocket,
            limits: configuration.limits,
            responder: dispatcher,
            answers: answers,
            connections: connections,
            refused: { admission in metrics?.connectionRefused(admission == .tooManyOfOneUser ? .perUserShare : .limit) },
            serving: { readiness.socketServing($0) },
            logger: logger,
            onListening: { notifier.ready() },
            onStopping: { notifier.stopping() }
        )
        // SIGHUP's trap, registered before any service runs: a SIGHUP once the socket serves (a
        // `systemctl reload` right after the start) is a reload, not lost while the reload
        // service was still starting.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // The group stops its services in reverse order, each after the one behind it has
        // finished: the socket first (no new requests; open ones are closed), then the
        // metrics, reloads and validation, then the pending sign-ins, then the sessions and
        // their refreshes; the watchdog keeps systemd informed to the end.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let watchdog = WatchdogService(notifier: notifier) {
            services.append(.init(service: watchdog))
        }
        services += [
            .init(service: RefreshScheduler(sessions: sessions)),
            .init(service: LoginFlowService(flows: flows, firstUse: firstUse, notifier: signInNotifier, consent: consent)),
            .init(service: validator),
            .init(service: HangupSignalService(signals: hangups, reloader: reloader, logger: logger)),
        ]
        if let exposition, let metricsListenerStatus {
            services.append(
                .init(
                    service: MetricsListener(
                        address: inheritedMetricsSocket == nil ? configuration.metricsAddress : nil,
                        inheritedDescriptor: inheritedMetricsSocket,
                        exposition: exposition,
                        withProviders: configuration.metricsWithProviders,
                        status: metricsListenerStatus,
                        logger: logger
                    )
                )
            )
        }
        services.append(.init(service: server))
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        var status = ExitStatus.success
        do {
            try await group.run()
        } catch {
            // An error escaping ServiceGroup.run() must not crash the process.
            logger.critical("stopped on an error", metadata: ["error": "\(error)"])
            status = .setupFailed
        }
        // A restart keeps memory-only sessions in systemd's descriptor store (SessionHandover).
        let handedOver = await sessions.memorySessionsToHandOver()
        if let problem = SessionHandover.store(handedOver, notifier: notifier) {
            logger.error("memory sessions could not be handed to systemd; they end with this run: \(problem)")
        } else if notifier.isEnabled, !handedOver.isEmpty {
            logger.notice("memory sessions handed to systemd's descriptor store", metadata: ["sessions.handed_over": "\(handedOver.count)"])
        }
        logger.notice("stopped")
        return status
    }

    /// Restores the sessions saved before the restart. An unreadable file costs its uid's
    /// sessions, with a clear log line, and never the daemon.
    private static func restoreSessions(
        _ sessions: SessionManager,
        from persistence: SessionPersistence,
        registry: ProviderRegistry,
        unusable: Set<ProviderID>,
        notifier: SignInNotifier?,
        logger: Logger
    ) async {
        guard let store = persistence.store() else {
            // Their key is missing or out of reach: the files stay as they are (a new key would
            // lose them), and their users are told that they must sign in for now.
            for uid in persistence.uidsWithSavedSessions {
                notifier?.savedSessionsLost(uid: uid, because: persistence.openFailure ?? "the session store cannot be opened")
            }
            return
        }
        let (saved, problems) = store.loadAll()
        for problem in problems {
            logger.error(
                "\(problem.keptUnread ? "saved sessions out of reach for now" : "saved sessions lost"): \(problem)",
                metadata: problem.uid.map { ["peer.uid": "\($0)"] } ?? [:]
            )
            if let uid = problem.uid { notifier?.savedSessionsLost(uid: uid, because: problem.reason) }
        }
        let restored = await sessions.restore(saved, bindings: registry.sessionBindings, unusable: unusable)
        logger.notice("saved sessions restored", metadata: ["sessions.restored": "\(restored)", "storage.directory": "\(store.directory)"])
    }
}

/// SIGHUP reloads `providers.d`, like `config.reload`.
private struct HangupSignalService: Service, CustomStringConvertible {
    /// SIGHUP, trapped since before the socket served.
    let signals: UnixSignalsSequence
    let reloader: ProviderReloader
    let logger: Logger
    var description: String { "HangupSignalService" }

    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            logger.notice("SIGHUP received: reloading the providers")
            // The reloader logs the outcome; a failed reload leaves the providers as they were.
            _ = try? await reloader.reload()
        }
    }
}

extension String {
    /// Cut or filled with spaces to `width` characters, for aligned log columns.
    func padded(to width: Int) -> String {
        count >= width ? String(prefix(width)) : self + String(repeating: " ", count: width - count)
    }
}
