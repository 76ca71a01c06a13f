import NIOCore

/// Runs a task on the event loop that owns its connection's channel: the RPC server's request
/// tasks (``OpenConnections``).
///
/// Without it every request hops threads twice: from the event loop that read the line to
/// Swift's global executor that runs the task, and back to the event loop to write the answer.
/// Running the request where its bytes arrive saves those hops: nearly half the context
/// switches per call (docs/BENCHMARKS.md, "What was optimised"). Actors the task
/// calls still serialize their own work as before; a default actor's work runs on this loop
/// too (SE-0417), so an actor that blocks — ``SessionManager``, whose saves `fsync` — has a
/// thread of its own.
final class EventLoopTaskExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
