package import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Retries `condition` for up to `timeout`, for effects the daemon applies asynchronously: the
/// tests wait on conditions, never on fixed sleeps.
///
/// It blocks its thread; an async test waiting for its own tasks uses ``result(of:timeout:)``,
/// since a blocked cooperative thread is one the awaited task may need (the pool has one
/// thread per core, two here).
///
/// A condition that throws ``StopWaiting`` ends the wait at once with that failure (the process
/// it waits on has exited, say); any other error counts as "not yet".
/// - Parameters:
///   - every: How long to wait between tries (longer for a condition that starts a process).
///   - failure: What the timeout's error says.
package func eventually(
    timeout: Duration = .seconds(10),
    every: Duration = .milliseconds(20),
    _ failure: @autoclosure () -> String = "the condition did not become true in time",
    _ condition: () throws -> Bool
) throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        do {
            if try condition() { return }
        } catch let stop as StopWaiting {
            throw TestFailure(stop.reason)
        } catch {}
        guard ContinuousClock.now < deadline else { throw TestFailure(failure()) }
        usleep(UInt32(every.components.attoseconds / 1_000_000_000_000 + every.components.seconds * 1_000_000))
    }
}

/// Thrown by a condition of ``eventually(timeout:_:_:)`` to stop waiting: it will never hold.
package struct StopWaiting: Error {
    package var reason: String
    package init(reason: String) { self.reason = reason }
}

/// Waits for `process` to exit, then up to 2 s for its output pipes (`outputs`) to reach their
/// end (a child it left may hold them open longer), and returns its exit status.
package func waitForExit(_ process: Process, outputs: [SharedText] = [], timeout: Duration, _ what: String) throws -> Int32 {
    try eventually(timeout: timeout, "\(what) did not exit in time") { !process.isRunning }
    try? eventually(timeout: .seconds(2)) { outputs.allSatisfy(\.isComplete) }
    return process.terminationStatus
}

/// ``eventually(timeout:_:)`` for async tests: it sleeps between tries instead of blocking, so
/// the tasks the condition waits for can run on the pool's threads meanwhile.
package func until(timeout: Duration = .seconds(30), _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if (try? condition()) == true { return }
        guard ContinuousClock.now < deadline else { throw TestFailure("the condition did not become true in time") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// The result of `task`, awaited for up to `timeout`; nil when it did not finish in time.
package func result<Success: Sendable, Failure: Error>(
    of task: Task<Success, Failure>,
    timeout: Duration = .seconds(30)
) async
    -> Result<Success, Failure>?
{
    await withTaskGroup(of: Result<Success, Failure>?.self) { group in
        group.addTask { await task.result }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        return await group.next() ?? nil
    }
}
