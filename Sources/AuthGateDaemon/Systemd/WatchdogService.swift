import FoundationEssentials
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

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
