import AuthGateCore
import AuthGateServer
import FoundationEssentials
import Logging

/// The RPC methods by topic, each part made once with only what it uses; ``RPCDispatcher`` runs
/// a request's method on the part its ``MethodTable`` entry names, for the request's caller.
struct MethodHandlers: Sendable {
    /// `providers.list` and `daemon.info`.
    var daemon: DaemonMethods
    /// `login`, the interactive flows and `register`.
    var signIn: SignInMethods
    /// `token`, `credential.get`, `token.watch`, `token.rejected`, `token.exchange`, `dpop.proof`.
    var tokens: TokenMethods
    /// `userinfo`, `status`, `logout` and `session.inspect`.
    var sessions: SessionMethods
    /// `consent.list` and `consent.revoke`.
    var consent: ConsentMethods
    /// `provider.discover`, `provider.register` and `provider.deregister`.
    var registration: RegistrationMethods
    /// `config.reload`, `metrics` and `storage.rekey`.
    var admin: AdminMethods

    /// Each part from the daemon's long-lived services, given only the ones it uses.
    /// - Parameters:
    ///   - broadcast: The sessions' current answers and watches, kept in step by the sessions.
    ///   - firstUse: The sign-ins of service providers' sessions on first use.
    ///   - consent: Consent before a program gets a token.
    ///   - metrics: Where sign-ins are counted; `nil` where nothing is.
    ///   - exposition: What the `metrics` method answers with; `nil` where the daemon has none.
    ///   - metricsListener: Whether the HTTP metrics listener serves, for `daemon.info`.
    ///   - persistence: The session store and its key, for `storage.rekey` and `daemon.info`;
    ///     `nil` in tests that run without one.
    init(
        registry: ProviderRegistry,
        sessions: SessionManager,
        flows: LoginFlowManager,
        reloader: ProviderReloader,
        context: DaemonContext,
        broadcast: SessionBroadcast,
        firstUse: FirstUseSignIns = FirstUseSignIns(),
        consent: ConsentKeeper,
        metrics: (any SignInObserver)? = nil,
        exposition: MetricsExposition? = nil,
        metricsListener: MetricsListenerStatus? = nil,
        persistence: SessionPersistence? = nil,
        logger: Logger
    ) {
        let admin = AdminCheck(context)
        let providerShare = ProviderRequestShare()
        let signIn = SignInMethods(
            registry: registry,
            sessions: sessions,
            flows: flows,
            throttle: LoginThrottle(),
            providerShare: providerShare,
            firstUse: firstUse,
            metrics: metrics,
            logger: logger
        )
        self.signIn = signIn
        daemon = DaemonMethods(
            registry: registry,
            sessions: sessions,
            context: context,
            admin: admin,
            published: broadcast.published,
            metricsListener: metricsListener,
            persistence: persistence
        )
        tokens = TokenMethods(
            registry: registry,
            sessions: sessions,
            consent: consent,
            watchers: broadcast.watchers,
            firstUse: firstUse,
            signIn: signIn,
            logger: logger
        )
        self.sessions = SessionMethods(
            registry: registry,
            sessions: sessions,
            consent: consent,
            providerShare: providerShare,
            admin: admin,
            logger: logger
        )
        self.consent = ConsentMethods(consent: consent, logger: logger)
        registration = RegistrationMethods(admin: admin, logger: logger)
        self.admin = AdminMethods(admin: admin, reloader: reloader, exposition: exposition, persistence: persistence, logger: logger)
    }

    /// The methods over `registry` with nothing on disk — no session store, no metrics, no
    /// provider directory to reload — on the clock `now`: how the in-process tests of the
    /// methods (`MethodHandlerTests`) and the `rpc-line` fuzz target run the dispatcher.
    static func inMemory(
        registry: ProviderRegistry,
        context: DaemonContext,
        logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        consent: ConsentKeeper? = nil
    ) -> MethodHandlers {
        let consent = consent ?? ConsentKeeper(directory: nil, asker: nil, logger: logger, now: now)
        let broadcast = SessionBroadcast(consent: consent, now: now)
        let sessions = SessionManager(logger: logger, observer: broadcast, now: now, random: random)
        return MethodHandlers(
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
            context: context,
            broadcast: broadcast,
            consent: consent,
            logger: logger
        )
    }
}

/// Who sent a request, as every method sees it.
struct MethodCaller: Sendable {
    let credentials: PeerCredentials
    /// The connection, for `token.watch` and a consent question's end when its caller goes;
    /// `nil` where there is none (in-process callers).
    var watchSink: WatchSink?

    var uid: UInt32 { credentials.uid }
    var pid: Int32 { credentials.pid }
    /// See ``PeerCredentials/isUnbounded``.
    var isUnbounded: Bool { credentials.isUnbounded }

    func sessionKey(_ provider: ProviderID, _ session: String?) throws(AuthGateError) -> SessionKey {
        guard let name = session.map(SessionName.init) ?? .default else {
            throw .validationFailed([FieldError(field: "session", message: "must be 1–64 characters of letters, digits, '.', '_' or '-'")])
        }
        return SessionKey(uid: uid, provider: provider, name: name)
    }

    /// The provider the caller names, if the caller may use it, and the caller's session key there.
    func resolve(
        _ provider: String,
        _ session: String?,
        in registry: ProviderRegistry
    ) async throws(AuthGateError) -> (
        ProviderConfiguration, any IdentityProvider, SessionKey
    ) {
        let (configuration, client) = try await registry.usableProvider(provider, for: credentials)
        return (configuration, client, try sessionKey(configuration.id, session))
    }

    func metadata(_ key: SessionKey, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        key.logMetadata(extra.merging(["peer.pid": "\(pid)"]) { mine, _ in mine })
    }
}

/// Who administers the daemon (``DaemonContext``'s `adminGroup` and `servesAdmin`).
struct AdminCheck: Sendable {
    var adminGroup: String
    var servesAdmin: Bool

    init(_ context: DaemonContext) {
        adminGroup = context.adminGroup
        servesAdmin = context.servesAdmin
    }

    /// Whether `caller` administers this daemon (never, on a daemon started with `--no-admin`).
    func admits(_ caller: MethodCaller) -> Bool {
        servesAdmin && AccessPolicy().isAdmin(caller.credentials, adminGroup: adminGroup)
    }

    /// Refuses a caller who does not administer this daemon: not root, its own user or a
    /// member of the admin group, or anyone at all on a daemon started with `--no-admin`.
    func require(_ what: String, of caller: MethodCaller) throws(AuthGateError) {
        guard servesAdmin else {
            throw AuthGateError(
                .permissionDenied,
                "This daemon was started with --no-admin: nobody may \(what) through its socket (a socket forwarded over SSH, docs/SECURITY.md)."
            )
        }
        guard AccessPolicy().isAdmin(caller.credentials, adminGroup: adminGroup) else {
            throw AuthGateError(
                .permissionDenied,
                "Only root, the daemon's own user and members of the group '\(adminGroup)' may \(what)."
            )
        }
    }
}
