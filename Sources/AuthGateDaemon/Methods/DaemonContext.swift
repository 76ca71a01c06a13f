import FoundationEssentials

/// What `daemon.info` reports about the running daemon, and who administers it.
public struct DaemonContext: Sendable {
    public var startedAt: ContinuousClock.Instant
    public var configDirectory: String
    public var mode: DaemonMode
    public var socketPath: String
    /// Members of this group may reload and list every user's sessions.
    public var adminGroup: String
    /// `false` (`authgated --no-admin`): no caller gets the admin methods, not even root or
    /// the daemon's own user, for a socket forwarded to another host.
    public var servesAdmin: Bool

    /// The admin group's default name (`authgated --admin-group`): its members (and root) may
    /// reload the providers and list every user's sessions.
    public static let defaultAdminGroup = "authgate-admin"

    public init(
        startedAt: ContinuousClock.Instant = .now,
        configDirectory: String,
        mode: DaemonMode,
        socketPath: String,
        adminGroup: String = DaemonContext.defaultAdminGroup,
        servesAdmin: Bool = true
    ) {
        self.adminGroup = adminGroup
        self.servesAdmin = servesAdmin
        self.startedAt = startedAt
        self.configDirectory = configDirectory
        self.mode = mode
        self.socketPath = socketPath
    }
}
