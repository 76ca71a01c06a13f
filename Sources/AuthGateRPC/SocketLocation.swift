import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon listens, so that the daemon and its clients agree without flags.
public enum SocketLocation {
    /// The system daemon's socket.
    public static let systemSocket = "/run/authgate/authgate.sock"

    /// A per-user daemon's state directory: `$XDG_STATE_HOME/authgate`, else
    /// `~/.local/state/authgate`.
    public static func userStateDirectory(environment: [String: String]) -> String {
        userStateDirectory { environment[$0] }
    }

    private static func userStateDirectory(variable: (String) -> String?) -> String {
        if let state = variable("XDG_STATE_HOME"), state.hasPrefix("/") {
            return state + "/authgate"
        }
        if let home = variable("HOME"), home.hasPrefix("/") { return home + "/.local/state/authgate" }
        return FileManager.default.homeDirectoryForCurrentUser.path + "/.local/state/authgate"
    }

    /// A per-user daemon's socket: `$XDG_RUNTIME_DIR/authgate/authgate.sock`, else in the
    /// user's state directory (for sessions without a runtime directory, e.g. `su`, containers).
    public static func userSocket(environment: [String: String]) -> String {
        userSocket { environment[$0] }
    }

    private static func userSocket(variable: (String) -> String?) -> String {
        if let runtime = variable("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") {
            return runtime + "/authgate/authgate.sock"
        }
        return userStateDirectory(variable: variable) + "/authgate.sock"
    }

    /// The socket a client should use: `AUTHGATE_SOCKET`, else the user's daemon when its
    /// socket exists, else the system daemon. The variables are this process's, read one by
    /// one (``ProcessEnvironment``): every `authgate token` and credential helper asks this.
    public static func forClient() -> String {
        forClient(variable: ProcessEnvironment.value)
    }

    /// ``forClient()`` for the variables in `environment`.
    public static func forClient(environment: [String: String]) -> String {
        forClient { environment[$0] }
    }

    private static func forClient(variable: (String) -> String?) -> String {
        if let explicit = variable("AUTHGATE_SOCKET"), !explicit.isEmpty {
            return explicit
        }
        let user = userSocket(variable: variable)
        return access(user, F_OK) == 0 ? user : systemSocket
    }
}
