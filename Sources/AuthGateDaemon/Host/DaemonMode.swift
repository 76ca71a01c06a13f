/// Whether the daemon serves the whole machine or one user.
public enum DaemonMode: String, Sendable {
    case system
    case user
}
