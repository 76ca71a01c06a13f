import Logging
import ServiceLifecycle

/// Refreshes sessions ahead of expiry: once a second it asks the ``SessionManager`` to start
/// the refreshes that are due. The manager plans each session's time with jitter (see
/// `RefreshSchedule`), so a second's work stays small however many sessions there are.
///
/// One owned loop, stopped by the graceful shutdown; the refreshes themselves belong to the
/// manager, which cancels them on shutdown.
struct RefreshScheduler: Service, CustomStringConvertible {
    let sessions: SessionManager
    /// How often due refreshes are looked for; the precision of every planned time.
    var interval: Duration = .seconds(1)

    var description: String { "RefreshScheduler" }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sessions.refreshDue()
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return  // shutdown
                }
            }
        }
    }
}
