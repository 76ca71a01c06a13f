import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Retries `condition` for up to `timeout`, for effects the daemon applies asynchronously: the
/// tests wait on conditions, never on fixed sleeps.
///
/// It blocks its thread; an async test waiting for its own tasks uses ``result(of:timeout:)``,
/// since a blocked cooperative thread is one the awaited task may need (the pool has one
/// thread per core, two here).
func eventually(timeout: Duration = .seconds(10), _ condition: () throws -> Bool) throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if (try? condition()) == true { return }
        guard ContinuousClock.now < deadline else { throw TestFailure("the condition did not become true in time") }
        usleep(20_000)
    }
}

/// ``eventually(timeout:_:)`` for async tests: it sleeps between tries instead of blocking, so
/// the tasks the condition waits for can run on the pool's threads meanwhile.
func until(timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if (try? condition()) == true { return }
        guard ContinuousClock.now < deadline else { throw TestFailure("the condition did not become true in time") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// The result of `task`, awaited for up to `timeout`; nil when it did not finish in time.
func result<Success: Sendable, Failure: Error>(
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
