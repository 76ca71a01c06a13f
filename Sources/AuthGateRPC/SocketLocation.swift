public import FoundationEssentials

/// Where the daemon listens, so that the daemon and its clients agree without flags.
public enum SocketLocation {
    /// The system daemon's socket.
    public static let systemSocket = "/run/authgate/authgate.sock"

    /// A per-user daemon's state directory: `$XDG_STATE_HOME/authgate`, else
    /// `~/.local/state/authgate`.
    public static func userStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/authgate"
        }
        return homeDirectory(environment: environment) + "/.local/state/authgate"
    }

    /// A per-user daemon's socket: `$XDG_RUNTIME_DIR/authgate/authgate.sock`, else in the
    /// user's state directory (for sessions without a runtime directory, e.g. `su`, containers).
    public static func userSocket(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return runtime + "/authgate/authgate.sock"
        }
        return userStateDirectory(environment: environment) + "/authgate.sock"
    }

    /// The socket a client should use: `AUTHGATE_SOCKET`, else the user's daemon when its
    /// socket exists, else the system daemon.
    public static func forClient(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["AUTHGATE_SOCKET"], !explicit.isEmpty {
            return explicit
        }
        let user = userSocket(environment: environment)
        return FileManager.default.fileExists(atPath: user) ? user : systemSocket
    }

    private static func homeDirectory(environment: [String: String]) -> String {
        if let home = environment["HOME"], home.hasPrefix("/") { return home }
        return FileManager.default.homeDirectoryForCurrentUser.path
    }
}
