import AuthGateRPC
public import AuthGateServer
public import FoundationEssentials
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon reads, listens and writes, and how strict it is.
public struct DaemonConfiguration: Sendable {
    public var providersDirectory: String
    public var socketPath: String
    public var stateDirectory: String
    public var mode: DaemonMode
    /// Any provider problem stops the daemon at start-up.
    public var strict: Bool
    /// A group that may use the socket too (mode 0660 instead of 0600).
    public var socketGroup: String?
    /// systemd's `$CREDENTIALS_DIRECTORY`: where `LoadCredential=authgate.key:…` puts the
    /// storage key.
    public var credentialsDirectory: String?
    /// Connection count, request and idle timeouts.
    public var limits: ConnectionLimits
    /// Members may reload and list every user's sessions.
    public var adminGroup: String = DaemonConfiguration.defaultAdminGroup
    /// `--no-admin`: the socket serves no admin method to anyone (for forwarding over SSH).
    public var servesAdmin = true
    /// How long interactive sign-ins (device code, browser) may take.
    public var loginFlows: LoginFlowSettings
    /// Sessions one user may hold (root and the daemon's own user excepted).
    public var maximumSessionsPerUser = 1000
    /// Where `/metrics`, `/healthz` and `/readyz` are served (`--metrics-listen`); off when nil.
    public var metricsAddress: MetricsAddress?
    /// `--metrics-with-providers`: the HTTP listener shows provider-labelled families too
    /// (by default only the admin-only `metrics` RPC does).
    public var metricsWithProviders = false
    /// `--no-metrics`: count nothing (the `metrics` method then answers `method_not_found`).
    public var keepsMetrics = true
    /// `--key-store`: where the storage key may be kept (the credential always comes first).
    public var keyStore = KeyStoreChoice.auto
    /// The environment the keyring is found through (`DBUS_SESSION_BUS_ADDRESS`,
    /// `XDG_RUNTIME_DIR`, `PATH`); the process's by default.
    public var environment: [String: String] = ProcessInfo.processInfo.environment

    /// `--notify`: a desktop notification when a session needs a new sign-in (``SignInNotifier``).
    public var notify = false
    /// `--consent-timeout`: how long a consent question waits for the user before it denies.
    public var consentTimeout: Duration = .seconds(60)
    public static let defaultAdminGroup = DaemonContext.defaultAdminGroup

    public init(
        providersDirectory: String,
        socketPath: String,
        stateDirectory: String,
        mode: DaemonMode,
        strict: Bool = false,
        socketGroup: String? = nil,
        credentialsDirectory: String? = nil,
        limits: ConnectionLimits = ConnectionLimits(),
        loginFlows: LoginFlowSettings = LoginFlowSettings()
    ) {
        self.credentialsDirectory = credentialsDirectory
        self.limits = limits
        self.loginFlows = loginFlows
        self.providersDirectory = providersDirectory
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.mode = mode
        self.strict = strict
        self.socketGroup = socketGroup
    }

    /// Fills in what the command line left out.
    ///
    /// `--system` means system mode whoever runs it (the service's `User=authgate`).
    /// `--user`, or running as anyone but root, means user mode: the socket goes under
    /// `$XDG_RUNTIME_DIR` (or the state directory) and state under `$XDG_STATE_HOME`. The
    /// providers directory is `./providers.d` when the working directory has one (a checkout),
    /// else `/etc/authgate/providers.d` (system) or `$XDG_CONFIG_HOME/authgate/providers.d` (user).
    public static func resolve(
        providers: String?,
        socket: String?,
        stateDirectory: String?,
        user: Bool,
        system: Bool = false,
        strict: Bool,
        socketGroup: String?,
        limits: ConnectionLimits = ConnectionLimits(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> DaemonConfiguration {
        let mode: DaemonMode = system ? .system : (user || getuid() != 0 ? .user : .system)
        let providersDirectory =
            providers
            ?? {
                if FileManager.default.fileExists(atPath: "providers.d") { return "providers.d" }
                if mode == .system { return "/etc/authgate/providers.d" }
                let config =
                    environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
                    ?? (environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path) + "/.config"
                return config + "/authgate/providers.d"
            }()
        // Absolute, as `daemon.info` reports it: `authgate provider add` writes where it says.
        let absoluteProviders = providersDirectory.hasPrefix("/") ? providersDirectory : FileManager.default.currentDirectoryPath + "/" + providersDirectory
        var configuration = DaemonConfiguration(
            providersDirectory: absoluteProviders,
            socketPath: socket ?? (mode == .system ? SocketLocation.systemSocket : SocketLocation.userSocket(environment: environment)),
            stateDirectory: stateDirectory ?? (mode == .system ? "/var/lib/authgate" : SocketLocation.userStateDirectory(environment: environment)),
            mode: mode,
            strict: strict,
            socketGroup: socketGroup,
            credentialsDirectory: environment["CREDENTIALS_DIRECTORY"].flatMap { $0.isEmpty ? nil : $0 },
            limits: limits
        )
        configuration.environment = environment
        return configuration
    }
}
