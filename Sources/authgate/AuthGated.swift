import ArgumentParser
import AuthGateCore
import AuthGateDaemon
import AuthGateServer
import Dispatch
import FoundationEssentials
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `authgated`, the daemon: the one executable run by that name (``Invocation/daemon(_:)``).
/// Parses the command line, sets up logging and runs the daemon.
struct AuthGated: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authgated",
        abstract: "Signs local users and services in to identity providers and hands out their tokens over a Unix socket.",
        version: AuthGateVersion.current
    )

    @Option(help: ArgumentHelp("Directory of provider files (*.json).", valueName: "dir"))
    var providers: String?

    @Option(help: ArgumentHelp("Unix socket to listen on.", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Directory for persistent state.", valueName: "dir"))
    var stateDirectory: String?

    @Option(name: .customLong("socket-group"), help: ArgumentHelp("Group that may use the socket too (mode 0660).", valueName: "group"))
    var socketGroup: String?

    @Flag(help: "Run as a per-user daemon (socket under $XDG_RUNTIME_DIR, state under $XDG_STATE_HOME).")
    var user = false

    @Flag(help: "Run as the system daemon (/run/authgate, /var/lib/authgate) even when not root, as the service's own user.")
    var system = false

    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Connections served at once; more are refused.", valueName: "n"))
    var maximumConnections = 1024

    @Option(name: .customLong("request-timeout"), help: ArgumentHelp("Seconds a request line may take to arrive.", valueName: "seconds"))
    var requestTimeout = 10.0

    @Option(name: .customLong("idle-timeout"), help: ArgumentHelp("Seconds an idle connection stays open.", valueName: "seconds"))
    var idleTimeout = 300.0

    @Option(name: .customLong("admin-group"), help: ArgumentHelp("Group whose members may reload and list every user's sessions.", valueName: "group"))
    var adminGroup = DaemonConfiguration.defaultAdminGroup

    @Flag(
        name: .customLong("no-admin"),
        help: """
            Serve no admin method (reload, provider discovery and registration, rekey, metrics, every user's \
            sessions) to anyone, root and the daemon's own user included, and exempt nobody from the per-user \
            shares: for a daemon whose socket is forwarded to another host (ssh -R), where every connection \
            arrives as your uid, or one whose callers may run as root (a Kubernetes node agent).
            """
    )
    var noAdmin = false

    @Flag(help: "Refuse to start when any provider file is invalid.")
    var strict = false

    @Flag(help: "Validate the providers (files and endpoints), print the report and exit (0 when all are ready).")
    var check = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(
        name: .customLong("login-timeout"),
        help: ArgumentHelp("How long an interactive sign-in (device code or browser) may take before it ends with flow_expired.", valueName: "seconds")
    )
    var loginTimeout = 600

    @Option(
        name: .customLong("max-sessions-per-user"),
        help: ArgumentHelp("Sessions one user may hold at once (root and the daemon's own user are not bound).", valueName: "n")
    )
    var maximumSessionsPerUser = 1000

    @Option(
        name: .customLong("metrics-listen"),
        help: ArgumentHelp(
            "Serve GET /metrics (Prometheus), /healthz and /readyz over HTTP on this address: PORT (loopback), HOST:PORT or [IPv6]:PORT. Off unless given.",
            valueName: "address:port"
        )
    )
    var metricsListen: String?

    @Flag(
        name: .customLong("metrics-with-providers"),
        help:
            "Show the families labelled by provider (ids, per-provider counts) on --metrics-listen too; by default only the admin-only `authgate metrics` shows them, since anyone who reaches the port reads it."
    )
    var metricsWithProviders = false

    @Option(
        name: .customLong("key-store"),
        help: ArgumentHelp(
            "Where the storage key of persistent sessions is kept: auto (a per-user daemon uses the Secret Service when its session has one, else the state directory's file), file or secret-service. A systemd credential authgate.key always comes first.",
            valueName: "auto|file|secret-service"
        )
    )
    var keyStore = "auto"

    @Flag(
        help:
            "Tell the desktop when a session needs a new sign-in: one notification (notify-send, on the session bus) with the command to run and, for providers that sign in in a browser, a Sign in action. Nothing when there is no session bus."
    )
    var notify = false

    @Option(
        name: .customLong("consent-timeout"),
        help: ArgumentHelp(
            "Seconds the user has to answer a consent question (access.confirm, or a session that asks) before the program is refused.",
            valueName: "seconds"
        )
    )
    var consentTimeout = 60

    @Flag(name: .customLong("no-metrics"), help: "Keep no metrics at all (their cost on the cached token path is measured in docs/BENCHMARKS.md).")
    var noMetrics = false

    /// Runs the daemon with `arguments` as an asynchronous `main` would, and exits with its
    /// status. The executable's `main` stays synchronous: an asynchronous one would start the
    /// concurrency runtime's main queue in every `authgate token` too. Never inlined into
    /// `main`: the task's priority (an `Optional<TaskPriority>` on the stack) would have every
    /// start look up that type's metadata by name, a sixth of `authgate token`'s work.
    @inline(never)
    static func start(_ arguments: [String]) -> Never {
        Task {
            await main(arguments)
            Glibc.exit(0)
        }
        dispatchMain()
    }

    func validate() throws {
        guard !(user && system) else { throw ValidationError("--user and --system exclude each other.") }
        guard maximumConnections >= 1, requestTimeout > 0, idleTimeout > 0 else {
            throw ValidationError("--max-connections, --request-timeout and --idle-timeout must be positive.")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        guard (1...86_400).contains(loginTimeout) else {
            throw ValidationError("--login-timeout must be between 1 and 86400 seconds.")
        }
        guard KeyStoreChoice(rawValue: keyStore) != nil else { throw ValidationError("--key-store must be auto, file or secret-service.") }
        guard (1...3600).contains(consentTimeout) else { throw ValidationError("--consent-timeout must be between 1 and 3600 seconds.") }
        guard maximumSessionsPerUser >= 1 else { throw ValidationError("--max-sessions-per-user must be positive.") }
        guard !(noMetrics && metricsListen != nil) else { throw ValidationError("--no-metrics and --metrics-listen exclude each other.") }
        if let metricsListen, MetricsAddress(metricsListen) == nil {
            throw ValidationError("--metrics-listen must be PORT, HOST:PORT or [IPv6]:PORT with a port from 1 to 65535.")
        }
    }

    func run() async throws {
        var configuration = DaemonConfiguration.resolve(
            providers: providers,
            socket: socket,
            stateDirectory: stateDirectory,
            user: user,
            system: system,
            strict: strict,
            socketGroup: socketGroup,
            limits: ConnectionLimits(
                maximumConnections: maximumConnections,
                requestTimeout: .milliseconds(Int(requestTimeout * 1000)),
                idleTimeout: .milliseconds(Int(idleTimeout * 1000))
            )
        )
        configuration.adminGroup = adminGroup
        configuration.servesAdmin = !noAdmin
        // Nobody administers it: root's and the daemon's own uid's callers share like anyone.
        configuration.limits.exemptsAdministrators = !noAdmin
        configuration.loginFlows.lifetime = TimeInterval(loginTimeout)
        configuration.maximumSessionsPerUser = maximumSessionsPerUser
        configuration.metricsAddress = metricsListen.flatMap(MetricsAddress.init)
        configuration.keepsMetrics = !noMetrics
        configuration.metricsWithProviders = metricsWithProviders
        configuration.keyStore = KeyStoreChoice(rawValue: keyStore) ?? .auto
        configuration.notify = notify
        configuration.consentTimeout = .seconds(consentTimeout)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let journal = JournalLogHandler.isJournalStream(environment: ProcessInfo.processInfo.environment)
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = EscapingLogHandler(
                wrapping: journal ? JournalLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            )
            handler.logLevel = check ? .critical : level
            return handler
        }
        let logger = Logger(label: "authgated")
        if check {
            let (report, status) = await Daemon.check(configuration, logger: logger)
            print(report, terminator: "")
            throw ExitCode(status.rawValue)
        }
        logger.notice(
            "starting",
            metadata: [
                "version": "\(AuthGateVersion.current)", "mode": "\(configuration.mode.rawValue)",
                "providers.directory": "\(configuration.providersDirectory)", "socket.path": "\(configuration.socketPath)",
            ]
        )
        let status = await Daemon.run(configuration, logger: logger)
        if status != .success { throw ExitCode(status.rawValue) }
    }
}
