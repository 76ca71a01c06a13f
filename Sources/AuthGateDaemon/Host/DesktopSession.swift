import AuthGateCore

/// The user's desktop session as the daemon's environment shows it: the session bus, and the
/// environment the helpers the daemon runs on it need (`secret-tool`, `notify-send`, the
/// askpass program, `xdg-open`).
///
/// A daemon started by the user's systemd manager has the bus at `$XDG_RUNTIME_DIR/bus` even
/// when `DBUS_SESSION_BUS_ADDRESS` was not imported; a system daemon, or one started over SSH,
/// has none, and then nothing that needs the desktop is tried.
struct DesktopSession: Sendable {
    /// The daemon's environment without what is the daemon's alone, with the bus named.
    let childEnvironment: [String: String]

    /// The session bus of `environment`, or why there is none (for the log of who needs one).
    static func find(environment: [String: String]) -> Result<DesktopSession, NoSession> {
        // What systemd hands the daemon is the daemon's alone: no helper may notify, take the
        // inherited socket or read the credentials.
        var child = environment.filter { !daemonOnlyVariables.contains($0.key) }
        if (environment["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty {
            guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"),
                let bus = StorageFiles.pathStatus(runtime + "/bus"), !bus.isRegularFile, !bus.isDirectory
            else { return .failure(NoSession()) }
            child["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(runtime)/bus"
        }
        return .success(DesktopSession(childEnvironment: child))
    }

    struct NoSession: Error, CustomStringConvertible {
        var description: String { "there is no session bus (DBUS_SESSION_BUS_ADDRESS is not set and there is no $XDG_RUNTIME_DIR/bus)" }
    }

    /// `environment` without what is the daemon's alone, as `NAME=value` lines: what a helper
    /// gets where there is no session bus.
    static func withoutDaemonVariables(_ environment: [String: String]) -> [String] {
        environment.filter { !daemonOnlyVariables.contains($0.key) }.map { "\($0.key)=\($0.value)" }.sorted()
    }

    /// `NAME=value` lines for ``ChildProcess``, sorted.
    var environmentLines: [String] { childEnvironment.map { "\($0.key)=\($0.value)" }.sorted() }

    /// The program `name` on the session's `PATH` (then /usr/bin, /bin).
    func program(_ name: String) -> String? { ChildProcess.find(name, in: childEnvironment["PATH"]) }

    private static let daemonOnlyVariables: Set<String> = [
        "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "CREDENTIALS_DIRECTORY",
    ]
}
