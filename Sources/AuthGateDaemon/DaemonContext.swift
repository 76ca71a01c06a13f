import FoundationEssentials

/// What `daemon.info` reports about the running daemon, and who administers it.
public struct DaemonContext: Sendable {
    public var startedAt: ContinuousClock.Instant
    public var configDirectory: String
    public var mode: DaemonMode
    public var socketPath: String
    /// Members of this group may reload and list every user's sessions.
    public var adminGroup: String

    public init(
        startedAt: ContinuousClock.Instant = .now,
        configDirectory: String,
        mode: DaemonMode,
        socketPath: String,
        adminGroup: String = DaemonConfiguration.defaultAdminGroup
    ) {
        self.adminGroup = adminGroup
        self.startedAt = startedAt
        self.configDirectory = configDirectory
        self.mode = mode
        self.socketPath = socketPath
    }
}
