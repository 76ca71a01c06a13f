import AuthGateCore
import FoundationEssentials
import Logging

/// The daemon's long-lived parts that answer RPC methods, shared by every connection: what
/// ``RPCDispatcher`` is built from and every ``MethodHandlers`` call uses.
struct DaemonServices: Sendable {
    let registry: ProviderRegistry
    let sessions: SessionManager
    let flows: LoginFlowManager
    let reloader: ProviderReloader
    let throttle: LoginThrottle
    let context: DaemonContext
    let logger: Logger
    /// The sessions' current answers and watches, kept in step by the session manager.
    let broadcast: SessionBroadcast
    var providerShare = ProviderRequestShare()
    /// The sign-ins of service providers' sessions on first use.
    var firstUse = FirstUseSignIns()
    /// Consent before a program gets a token; by default nothing is remembered and nobody can
    /// be asked, so a session that asks first is denied to every program.
    var consent: ConsentKeeper
    /// Where each request is counted and timed.
    var metrics: DaemonMetrics?
    /// What the `metrics` method answers with; `nil` where the daemon has no metrics.
    var exposition: MetricsExposition?
    /// Whether the HTTP metrics listener serves, for `daemon.info`; `nil` where there is none.
    var metricsListener: MetricsListenerStatus?
    /// The session store and its key, for `storage.rekey` and `daemon.info`; `nil` in tests
    /// that run without one.
    var persistence: SessionPersistence?
}

extension DaemonServices {
    /// The services over `registry` with nothing on disk — no session store, no metrics, no
    /// provider directory to reload — on the clock `now`: how the in-process tests of the
    /// methods (`MethodHandlerTests`) and the `rpc-line` fuzz target run the dispatcher.
    static func inMemory(
        registry: ProviderRegistry,
        context: DaemonContext,
        logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        consent: ConsentKeeper? = nil
    ) -> DaemonServices {
        let consent = consent ?? ConsentKeeper(directory: nil, asker: nil, logger: logger, now: now)
        let broadcast = SessionBroadcast(consent: consent, now: now)
        let sessions = SessionManager(logger: logger, observer: broadcast, now: now, random: random)
        return DaemonServices(
            registry: registry,
            sessions: sessions,
            flows: LoginFlowManager(sessions: sessions, logger: logger),
            reloader: ProviderReloader(
                directory: "/nonexistent/providers.d",
                registry: registry,
                sessions: sessions,
                validator: ProviderValidator(registry: registry, logger: logger),
                logger: logger
            ),
            throttle: LoginThrottle(),
            context: context,
            logger: logger,
            broadcast: broadcast,
            consent: consent
        )
    }
}
