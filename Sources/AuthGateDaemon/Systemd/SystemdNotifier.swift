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

/// Socket activation (`sd_listen_fds(3)`): the listening sockets systemd passed from fd 3 on,
/// named by `$LISTEN_FDNAMES` (`FileDescriptorName=`).
enum SystemdSocketActivation {
    static let firstDescriptor: Int32 = 3
    /// The name of the metrics socket (`authgated-metrics.socket`).
    static let metricsName = "metrics"

    /// The inherited sockets, when `$LISTEN_PID` names this process: the one named `metrics` is
    /// the metrics listener's, the first other one the RPC socket. The variables are removed so
    /// that no child inherits them.
    static func listeningDescriptors() -> (rpc: Int32?, metrics: Int32?) {
        let environment = ProcessInfo.processInfo.environment
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int32.init), count >= 1
        else { return (nil, nil) }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        var rpc: Int32?
        var metrics: Int32?
        for index in 0..<Int(count) {
            let descriptor = firstDescriptor + Int32(index)
            if index < names.count, names[index] == metricsName {
                metrics = metrics ?? descriptor
            } else {
                rpc = rpc ?? descriptor
            }
        }
        return (rpc, metrics)
    }
}
