import CLinux
import FoundationEssentials
import Logging
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// Tells systemd how the daemon is doing (`sd_notify(3)`): `READY=1`, `RELOADING=1`,
/// `STOPPING=1`, `WATCHDOG=1`, as datagrams on `$NOTIFY_SOCKET`.
///
/// Written here rather than linking libsystemd: the protocol is one datagram per message to a
/// Unix socket, a path or an abstract name (`@name`). Without `$NOTIFY_SOCKET` (not run by
/// systemd with `Type=notify`) every call does nothing.
struct SystemdNotifier: Sendable {
    private let socketPath: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    var isEnabled: Bool { socketPath != nil }

    /// The daemon serves its socket.
    func ready() { send("READY=1") }

    /// A reload begins; `ready()` ends it. systemd wants the monotonic clock with it (252+).
    func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(ag_monotonic_usec())")
    }

    func stopping() { send("STOPPING=1") }

    func watchdog() { send("WATCHDOG=1") }

    /// Sends one message; failures are ignored, as `sd_notify` callers do.
    func send(_ message: String) {
        guard let socketPath else { return }
        let path = Array(socketPath.utf8)
        let bytes = Array(message.utf8)
        _ = path.withUnsafeBufferPointer { path in
            bytes.withUnsafeBufferPointer { bytes in
                path.withMemoryRebound(to: CChar.self) { path in
                    bytes.withMemoryRebound(to: CChar.self) { bytes in
                        ag_send_datagram(path.baseAddress, path.count, bytes.baseAddress, bytes.count)
                    }
                }
            }
        }
    }
}

/// Pets systemd's watchdog at half of `$WATCHDOG_USEC` while the daemon runs. A daemon whose
/// event loops are stuck stops sending, and systemd restarts it.
struct WatchdogService: Service, CustomStringConvertible {
    let notifier: SystemdNotifier
    let interval: Duration

    var description: String { "WatchdogService" }

    /// `nil` unless systemd asked for a watchdog for this very process.
    init?(notifier: SystemdNotifier, environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard notifier.isEnabled, let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"].flatMap(Int32.init), pid != getpid() { return nil }
        self.notifier = notifier
        interval = .microseconds(usec / 2)
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                notifier.watchdog()
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
            }
        }
    }
}

/// Socket activation (`sd_listen_fds(3)`): the listening socket systemd passed as fd 3.
enum SystemdSocketActivation {
    static let firstDescriptor: Int32 = 3

    /// The inherited listening socket, when `$LISTEN_PID` names this process and
    /// `$LISTEN_FDS` is at least 1. The variables are removed so that no child inherits them.
    static func listeningDescriptor() -> Int32? {
        let environment = ProcessInfo.processInfo.environment
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
              let count = environment["LISTEN_FDS"].flatMap(Int32.init), count >= 1 else { return nil }
        return firstDescriptor
    }
}
