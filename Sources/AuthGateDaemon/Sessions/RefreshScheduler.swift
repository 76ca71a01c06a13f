import Logging
import ServiceLifecycle

/// Refreshes sessions ahead of expiry: sleeps until the earliest planned refresh time, then
/// asks the ``SessionManager`` to start what is due. A plan earlier than the time it sleeps to
/// (a new sign-in, a retry, a restored session) wakes it at once, so a refresh starts when it
/// was planned, not at the next tick of a fixed clock. Refreshes that wait for a free slot are
/// started by the manager itself as slots free up.
///
/// The session manager's service in the group: one owned loop, stopped by the graceful
/// shutdown, after which the manager cancels the refreshes it owns (``SessionManager/shutdown()``).
struct RefreshScheduler: Service, CustomStringConvertible {
    let sessions: SessionManager
    /// The longest sleep even when nothing is planned sooner: plans are wall-clock times, and
    /// a clock set forward must not leave them waiting on a monotonic sleep for hours.
    var longestSleep: Duration = .seconds(60)

    var description: String { "RefreshScheduler" }

    func run() async throws {
        let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await sessions.setSchedulerWakeup { wake.yield() }
        await cancelWhenGracefulShutdown {
            var woken = wakeups.makeAsyncIterator()
            while !Task.isCancelled {
                await sessions.refreshDue()
                let sleep = await sessions.secondsUntilNextPlan().map { min(Duration.seconds($0), longestSleep) } ?? longestSleep
                // Whichever comes first: the planned time, or a wake-up for an earlier plan.
                // The iterator returns nil when the shutdown cancels this task.
                let stillRunning = await withTaskGroup(of: Void.self) { timer in
                    timer.addTask {
                        // Cancelled (woken first), it must not yield: that wake-up would be spurious.
                        do {
                            try await Task.sleep(for: sleep)
                            wake.yield()
                        } catch {}
                    }
                    defer { timer.cancelAll() }
                    return await woken.next() != nil
                }
                if !stillRunning { return }
            }
        }
        await sessions.shutdown()
    }
}
