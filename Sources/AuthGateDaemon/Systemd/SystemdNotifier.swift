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

    /// Sends one message, with `descriptors` attached (`FDSTORE=1`); what went wrong, or `nil`.
    /// Most callers ignore failures, as `sd_notify` callers do.
    @discardableResult
    func send(_ message: String, descriptors: [Int32] = []) -> String? {
        guard let socketPath else { return nil }
        let path = Array(socketPath.utf8)
        let bytes = Array(message.utf8)
        let result = path.withUnsafeBufferPointer { path in
            bytes.withUnsafeBufferPointer { bytes in
                path.withMemoryRebound(to: CChar.self) { path in
                    bytes.withMemoryRebound(to: CChar.self) { bytes in
                        descriptors.isEmpty
                            ? ag_send_datagram(path.baseAddress, path.count, bytes.baseAddress, bytes.count)
                            : ag_send_datagram_with_fds(path.baseAddress, path.count, bytes.baseAddress, bytes.count, descriptors, Int32(descriptors.count))
                    }
                }
            }
        }
        return result == 0 ? nil : "cannot notify systemd at \(socketPath): \(StorageFiles.errorText())"
    }
}

/// The descriptors systemd passed from fd 3 on (`sd_listen_fds(3)`), named by
/// `$LISTEN_FDNAMES`: listening sockets (`FileDescriptorName=`), and what the daemon handed to
/// its file descriptor store before a restart (``SessionHandover``).
enum SystemdSocketActivation {
    static let firstDescriptor: Int32 = 3
    /// The name of the metrics socket (`authgated-metrics.socket`).
    static let metricsName = "metrics"

    struct Passed {
        var rpc: Int32?
        var metrics: Int32?
        /// The file descriptor store's, by name.
        var stored: [String: Int32] = [:]
    }

    /// The inherited descriptors, when `$LISTEN_PID` names this process: the one named
    /// `metrics` is the metrics listener's, those named as ``SessionHandover``'s are the
    /// store's, the first other one the RPC socket. The variables are removed so that no child
    /// inherits them.
    static func passedDescriptors() -> Passed {
        let environment = ProcessInfo.processInfo.environment
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int32.init), count >= 1
        else { return Passed() }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        var passed = Passed()
        for index in 0..<Int(min(count, 256)) {
            let descriptor = firstDescriptor + Int32(index)
            // Nothing passed may reach a child the daemon runs.
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            let name = index < names.count ? names[index] : ""
            if name == metricsName {
                passed.metrics = passed.metrics ?? descriptor
            } else if name == SessionHandover.sessionsName || name == SessionHandover.keyName {
                if let earlier = passed.stored[name] { close(earlier) }
                passed.stored[name] = descriptor
            } else {
                passed.rpc = passed.rpc ?? descriptor
            }
        }
        return passed
    }
}
